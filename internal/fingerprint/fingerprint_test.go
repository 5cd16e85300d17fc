package fingerprint_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/goovo/idem/internal/fingerprint"
)

// keyArg is the argument the hook leaves out of the fingerprint.
const keyArg = "idempotencyKey"

// testSchemaSDL is a small schema with the kinds of input the canonical form
// has to handle: scalars of each kind, an enum, an input object with and
// without defaults, lists, arguments with defaults and an abstract type.
const testSchemaSDL = `
type Query { ping: Boolean }

directive @upper on FIELD

enum Priority { LOW HIGH }

input ItemInput {
  name: String!
  price: Float
  quantity: Int = 1
  tags: [String!]
  priority: Priority = LOW
}

interface Node { id: ID! }

type User implements Node { id: ID! name: String }

type Item implements Node {
  id: ID!
  name: String!
  price: Float
  tags: [String!]
  owner: User
  related(first: Int = 5, after: ID): [Item!]
}

type Mutation {
  createItem(
    idempotencyKey: String
    input: ItemInput!
    note: String
    dryRun: Boolean = false
    parentID: ID
    weight: Float
    labels: [String!]
    matrix: [[Int!]]
  ): Item
  updateItem(idempotencyKey: String, id: ID!, input: ItemInput!): Item
  deleteItem(idempotencyKey: String, id: ID!): Node
}
`

var testSchema = mustLoadSchema()

func mustLoadSchema() *ast.Schema {
	s, err := gqlparser.LoadSchema(&ast.Source{Name: "test.graphql", Input: testSchemaSDL})
	if err != nil {
		panic(err)
	}
	return s
}

// varsMode is how a request's variables JSON reaches the fingerprint.
type varsMode int

const (
	// jsonNumber: decoded with json.Decoder.UseNumber, as gqlgen's transports do.
	jsonNumber varsMode = iota
	// float64s: decoded with plain json.Unmarshal (numbers are float64).
	float64s
	// coerced: UseNumber, then validator.VariableValues, as gqlgen's
	// executor does before resolvers (and the hook) see the variables.
	coerced
	// literals: the requests have no variables at all.
	literals
)

func (m varsMode) String() string {
	return [...]string{"json.Number", "float64", "coerced", "literals"}[m]
}

// modesFor returns the ways to decode variables worth trying for requests:
// all of them when a request uses variables, one otherwise.
func modesFor(reqs ...request) []varsMode {
	for _, r := range reqs {
		if strings.Contains(r.query, "$") {
			return []varsMode{jsonNumber, float64s, coerced}
		}
	}
	return []varsMode{literals}
}

// request is a query and its variables as a client sends them.
type request struct {
	query string
	vars  string // JSON object; "" means no variables
}

// loadField loads query against schema and returns its first operation and
// that operation's first root field.
func loadField(schema *ast.Schema, query string) (*ast.OperationDefinition, *ast.Field, error) {
	doc, errs := gqlparser.LoadQuery(schema, query)
	if len(errs) > 0 {
		return nil, nil, errs
	}
	op := doc.Operations[0]
	for _, sel := range op.SelectionSet {
		if f, ok := sel.(*ast.Field); ok {
			return op, f, nil
		}
	}
	return op, nil, nil
}

// decodeVars decodes a variables JSON object the way mode says.
func decodeVars(schema *ast.Schema, op *ast.OperationDefinition, raw string, mode varsMode) (map[string]any, error) {
	if raw == "" {
		raw = "{}"
	}
	var vars map[string]any
	if mode == float64s {
		if err := json.Unmarshal([]byte(raw), &vars); err != nil {
			return nil, err
		}
		return vars, nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&vars); err != nil {
		return nil, err
	}
	if mode == coerced {
		return validator.VariableValues(schema, op, vars)
	}
	return vars, nil
}

// fingerprintOf returns the fingerprint of r's first mutation field.
func fingerprintOf(t *testing.T, r request, mode varsMode) fingerprint.Fingerprint {
	t.Helper()
	op, field, err := loadField(testSchema, r.query)
	if err != nil {
		t.Fatalf("query does not load: %v\n%s", err, r.query)
	}
	if op.Operation != ast.Mutation || field == nil {
		t.Fatalf("query has no mutation field:\n%s", r.query)
	}
	vars, err := decodeVars(testSchema, op, r.vars, mode)
	if err != nil {
		t.Fatalf("variables %s: %v", r.vars, err)
	}
	return fingerprint.Of(testSchema, "Mutation", field, vars, keyArg)
}

// canonicalText returns the canonical arguments and selection, to show in
// failure messages what the hashes were computed from.
func canonicalText(t *testing.T, r request, mode varsMode) string {
	t.Helper()
	op, field, err := loadField(testSchema, r.query)
	if err != nil || field == nil {
		return "<does not load>"
	}
	vars, err := decodeVars(testSchema, op, r.vars, mode)
	if err != nil {
		return "<bad variables>"
	}
	return fingerprint.CanonicalArguments(testSchema, field, vars, keyArg) + " " +
		fingerprint.CanonicalSelection(testSchema, field, vars)
}

func TestOfEqualForEquivalentRequests(t *testing.T) {
	tests := []struct {
		name string
		a, b request
	}{
		{
			name: "literal vs variable for an input object",
			a:    request{query: `mutation { createItem(idempotencyKey: "k", input: {name: "a", price: 2.5, tags: ["x", "y"]}) { id } }`},
			b: request{
				query: `mutation ($in: ItemInput!) { createItem(idempotencyKey: "k", input: $in) { id } }`,
				vars:  `{"in": {"name": "a", "price": 2.5, "tags": ["x", "y"]}}`,
			},
		},
		{
			name: "literal vs variable for scalars",
			a:    request{query: `mutation { createItem(input: {name: "a"}, note: "hi", weight: 3.25, parentID: "7") { id } }`},
			b: request{
				query: `mutation ($n: String, $w: Float, $p: ID) { createItem(input: {name: "a"}, note: $n, weight: $w, parentID: $p) { id } }`,
				vars:  `{"n": "hi", "w": 3.25, "p": "7"}`,
			},
		},
		{
			name: "literal vs variable inside an input object",
			a:    request{query: `mutation { createItem(input: {name: "a", quantity: 3}) { id } }`},
			b: request{
				query: `mutation ($q: Int) { createItem(input: {name: "a", quantity: $q}) { id } }`,
				vars:  `{"q": 3}`,
			},
		},
		{
			name: "literal vs variable for an enum",
			a:    request{query: `mutation { createItem(input: {name: "a", priority: HIGH}) { id } }`},
			b: request{
				query: `mutation ($p: Priority) { createItem(input: {name: "a", priority: $p}) { id } }`,
				vars:  `{"p": "HIGH"}`,
			},
		},
		{
			name: "unprovided variable with a default vs the default written out",
			a:    request{query: `mutation { createItem(input: {name: "a"}, note: "dflt") { id } }`},
			b:    request{query: `mutation ($n: String = "dflt") { createItem(input: {name: "a"}, note: $n) { id } }`},
		},
		{
			name: "unprovided variable without a default vs the argument left out",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation ($n: String) { createItem(input: {name: "a"}, note: $n) { id } }`},
		},
		{
			name: "unprovided variable inside an input object vs the field left out",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation ($q: Int) { createItem(input: {name: "a", quantity: $q}) { id } }`},
		},
		{
			name: "argument order",
			a:    request{query: `mutation { createItem(idempotencyKey: "k", input: {name: "a"}, note: "n", weight: 2) { id } }`},
			b:    request{query: `mutation { createItem(weight: 2, note: "n", input: {name: "a"}, idempotencyKey: "k") { id } }`},
		},
		{
			name: "input object field order",
			a:    request{query: `mutation { createItem(input: {name: "a", price: 1.5, quantity: 2, tags: ["t"]}) { id } }`},
			b:    request{query: `mutation { createItem(input: {tags: ["t"], quantity: 2, price: 1.5, name: "a"}) { id } }`},
		},
		{
			name: "input object field order in a variable",
			a: request{
				query: `mutation ($in: ItemInput!) { createItem(input: $in) { id } }`,
				vars:  `{"in": {"name": "a", "price": 1.5, "quantity": 2}}`,
			},
			b: request{
				query: `mutation ($in: ItemInput!) { createItem(input: $in) { id } }`,
				vars:  `{"in": {"quantity": 2, "price": 1.5, "name": "a"}}`,
			},
		},
		{
			name: "omitted argument vs its default",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, dryRun: false) { id } }`},
		},
		{
			name: "omitted input fields vs their defaults",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a", quantity: 1, priority: LOW}) { id } }`},
		},
		{
			name: "omitted input fields in a variable vs their defaults",
			a: request{
				query: `mutation ($in: ItemInput!) { createItem(input: $in) { id } }`,
				vars:  `{"in": {"name": "a"}}`,
			},
			b: request{query: `mutation { createItem(input: {name: "a", quantity: 1, priority: LOW}) { id } }`},
		},
		{
			name: "omitted argument in a nested field vs its default",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { related { id } } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { related(first: 5) { id } } }`},
		},
		{
			name: "Float 1 vs 1.0",
			a:    request{query: `mutation { createItem(input: {name: "a", price: 1}, weight: 1) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a", price: 1.0}, weight: 1.0) { id } }`},
		},
		{
			name: "Float 1 literal vs 1.0 in a variable",
			a:    request{query: `mutation { createItem(input: {name: "a"}, weight: 1) { id } }`},
			b: request{
				query: `mutation ($w: Float) { createItem(input: {name: "a"}, weight: $w) { id } }`,
				vars:  `{"w": 1.0}`,
			},
		},
		{
			name: "Float 2.50 vs 2.5 in variables",
			a: request{
				query: `mutation ($w: Float) { createItem(input: {name: "a"}, weight: $w) { id } }`,
				vars:  `{"w": 2.50}`,
			},
			b: request{query: `mutation { createItem(input: {name: "a"}, weight: 2.5) { id } }`},
		},
		{
			name: "Float 1e18 vs 1000000000000000000",
			a:    request{query: `mutation { createItem(input: {name: "a"}, weight: 1e18) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, weight: 1000000000000000000) { id } }`},
		},
		{
			name: "ID \"5\" vs 5",
			a:    request{query: `mutation { createItem(input: {name: "a"}, parentID: "5") { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, parentID: 5) { id } }`},
		},
		{
			name: "ID \"5\" vs 5 in variables",
			a: request{
				query: `mutation ($p: ID) { createItem(input: {name: "a"}, parentID: $p) { id } }`,
				vars:  `{"p": "5"}`,
			},
			b: request{
				query: `mutation ($p: ID) { createItem(input: {name: "a"}, parentID: $p) { id } }`,
				vars:  `{"p": 5}`,
			},
		},
		{
			name: "single value vs one-element list",
			a:    request{query: `mutation { createItem(input: {name: "a", tags: "t"}, labels: "l") { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a", tags: ["t"]}, labels: ["l"]) { id } }`},
		},
		{
			name: "single value vs one-element list in a variable",
			a: request{
				query: `mutation ($l: [String!]) { createItem(input: {name: "a"}, labels: $l) { id } }`,
				vars:  `{"l": "l"}`,
			},
			b: request{query: `mutation { createItem(input: {name: "a"}, labels: ["l"]) { id } }`},
		},
		{
			name: "single value vs nested one-element list",
			a:    request{query: `mutation { createItem(input: {name: "a"}, matrix: 7) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, matrix: [[7]]) { id } }`},
		},
		{
			name: "single value vs nested one-element list in a variable",
			a: request{
				query: `mutation ($m: [[Int!]]) { createItem(input: {name: "a"}, matrix: $m) { id } }`,
				vars:  `{"m": 7}`,
			},
			b: request{query: `mutation { createItem(input: {name: "a"}, matrix: [[7]]) { id } }`},
		},
		{
			name: "named fragment vs the same fields inline",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { ...F } } fragment F on Item { id name }`},
		},
		{
			name: "inline fragment on the field's type vs the same fields inline",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { ... on Item { id name } } }`},
		},
		{
			name: "inline fragment without type condition vs the same fields inline",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { ... { id name } } }`},
		},
		{
			name: "nested fragments vs the same fields inline",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id owner { id name } } }`},
			b: request{query: `mutation { createItem(input: {name: "a"}) { ...I } }
				fragment I on Item { id owner { ...U } }
				fragment U on User { id name }`},
		},
		{
			name: "inline fragment on an interface the type implements vs the same fields inline",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { ... on Node { id } name } }`},
		},
		{
			name: "field repeated through a fragment vs once",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { id ...F } } fragment F on Item { id name }`},
		},
		{
			name: "@include(if: true) vs no directive",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { id name @include(if: true) } }`},
		},
		{
			name: "@skip(if: false) vs no directive",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { id name @skip(if: false) } }`},
		},
		{
			name: "@include with a true variable vs no directive",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b: request{
				query: `mutation ($yes: Boolean!) { createItem(input: {name: "a"}) { id name @include(if: $yes) } }`,
				vars:  `{"yes": true}`,
			},
		},
		{
			name: "@skip(if: true) on a fragment spread vs the fragment left out",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { id ...F @skip(if: true) } } fragment F on Item { price }`},
		},
		{
			name: "whitespace and comments",
			a:    request{query: `mutation { createItem(input: {name: "a", price: 2}) { id name } }`},
			b: request{query: `
				# create one item
				mutation {
					createItem(
						input: { name: "a" , price: 2 } # the input
					) {
						id
						name
					}
				}
			`},
		},
		{
			name: "operation name",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation CreateOne { createItem(input: {name: "a"}) { id } }`},
		},
		{
			name: "explicit alias equal to the field name vs none",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { id name: name } }`},
		},
		{
			name: "different idempotency keys",
			a:    request{query: `mutation { createItem(idempotencyKey: "key-1", input: {name: "a"}) { id } }`},
			b:    request{query: `mutation { createItem(idempotencyKey: "key-2", input: {name: "a"}) { id } }`},
		},
		{
			name: "idempotency key present vs absent",
			a:    request{query: `mutation { createItem(idempotencyKey: "key-1", input: {name: "a"}) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
		},
		{
			name: "idempotency key literal vs variable",
			a:    request{query: `mutation { createItem(idempotencyKey: "key-1", input: {name: "a"}) { id } }`},
			b: request{
				query: `mutation ($k: String) { createItem(idempotencyKey: $k, input: {name: "a"}) { id } }`,
				vars:  `{"k": "key-2"}`,
			},
		},
	}
	for _, tt := range tests {
		for _, mode := range modesFor(tt.a, tt.b) {
			t.Run(tt.name+"/"+mode.String(), func(t *testing.T) {
				a := fingerprintOf(t, tt.a, mode)
				b := fingerprintOf(t, tt.b, mode)
				if a != b {
					t.Errorf("fingerprints differ (%v):\n a: %s\n    %s\n b: %s\n    %s",
						fingerprint.Differences(a.String(), b.String()),
						a, canonicalText(t, tt.a, mode), b, canonicalText(t, tt.b, mode))
				}
				if d := fingerprint.Differences(a.String(), b.String()); d != nil {
					t.Errorf("Differences = %q, want none", d)
				}
			})
		}
	}
}

func TestOfDiffersForDifferentRequests(t *testing.T) {
	const argsDiffer, selectionDiffers = "arguments", "selection set"
	tests := []struct {
		name string
		a, b request
		want []string
	}{
		{
			name: "different argument value",
			a:    request{query: `mutation { createItem(input: {name: "a"}, note: "x") { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, note: "y") { id } }`},
			want: []string{argsDiffer},
		},
		{
			name: "different input field value",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "b"}) { id } }`},
			want: []string{argsDiffer},
		},
		{
			name: "different variable value",
			a: request{
				query: `mutation ($in: ItemInput!) { createItem(input: $in) { id } }`,
				vars:  `{"in": {"name": "a", "price": 1.5}}`,
			},
			b: request{
				query: `mutation ($in: ItemInput!) { createItem(input: $in) { id } }`,
				vars:  `{"in": {"name": "a", "price": 1.25}}`,
			},
			want: []string{argsDiffer},
		},
		{
			name: "input field differs from its default",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a", quantity: 2}) { id } }`},
			want: []string{argsDiffer},
		},
		{
			name: "argument differs from its default",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, dryRun: true) { id } }`},
			want: []string{argsDiffer},
		},
		{
			name: "null vs omitted argument without default",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, note: null) { id } }`},
			want: []string{argsDiffer},
		},
		{
			name: "null variable vs omitted argument without default",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b: request{
				query: `mutation ($n: String) { createItem(input: {name: "a"}, note: $n) { id } }`,
				vars:  `{"n": null}`,
			},
			want: []string{argsDiffer},
		},
		{
			name: "null vs omitted input field without default",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a", price: null}) { id } }`},
			want: []string{argsDiffer},
		},
		{
			name: "empty string vs null",
			a:    request{query: `mutation { createItem(input: {name: "a"}, note: "") { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, note: null) { id } }`},
			want: []string{argsDiffer},
		},
		{
			name: "Float 1.5 vs 1",
			a:    request{query: `mutation { createItem(input: {name: "a"}, weight: 1.5) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, weight: 1) { id } }`},
			want: []string{argsDiffer},
		},
		{
			name: "Float 1 vs 1.0000001",
			a:    request{query: `mutation { createItem(input: {name: "a"}, weight: 1) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, weight: 1.0000001) { id } }`},
			want: []string{argsDiffer},
		},
		{
			name: "ID \"05\" vs 5",
			a:    request{query: `mutation { createItem(input: {name: "a"}, parentID: "05") { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, parentID: 5) { id } }`},
			want: []string{argsDiffer},
		},
		{
			name: "String \"5\" vs \"5.0\"",
			a:    request{query: `mutation { createItem(input: {name: "a"}, note: "5") { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, note: "5.0") { id } }`},
			want: []string{argsDiffer},
		},
		{
			name: "list order",
			a:    request{query: `mutation { createItem(input: {name: "a"}, labels: ["x", "y"]) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, labels: ["y", "x"]) { id } }`},
			want: []string{argsDiffer},
		},
		{
			name: "empty list vs omitted",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, labels: []) { id } }`},
			want: []string{argsDiffer},
		},
		{
			name: "string in a list vs the same string concatenated",
			a:    request{query: `mutation { createItem(input: {name: "a"}, labels: ["x,y"]) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}, labels: ["x", "y"]) { id } }`},
			want: []string{argsDiffer},
		},
		{
			name: "different alias inside the selection",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { id title: name } }`},
			want: []string{selectionDiffers},
		},
		{
			name: "different field order in the selection",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { name id } }`},
			want: []string{selectionDiffers},
		},
		{
			name: "extra field",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			want: []string{selectionDiffers},
		},
		{
			name: "extra nested field",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id owner { id } } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { id owner { id name } } }`},
			want: []string{selectionDiffers},
		},
		{
			name: "@include(if: false) removes a field",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { id name @include(if: false) } }`},
			want: []string{selectionDiffers},
		},
		{
			name: "@skip(if: true) removes a field",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { id name @skip(if: true) } }`},
			want: []string{selectionDiffers},
		},
		{
			name: "@include with a false variable removes a field",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b: request{
				query: `mutation ($yes: Boolean!) { createItem(input: {name: "a"}) { id name @include(if: $yes) } }`,
				vars:  `{"yes": false}`,
			},
			want: []string{selectionDiffers},
		},
		{
			name: "a directive other than @skip/@include",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id name } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { id name @upper } }`},
			want: []string{selectionDiffers},
		},
		{
			name: "different argument of a nested field",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { related(first: 2) { id } } }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { related(first: 3) { id } } }`},
			want: []string{selectionDiffers},
		},
		{
			name: "fragment with a different field",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { ...F } } fragment F on Item { id }`},
			b:    request{query: `mutation { createItem(input: {name: "a"}) { ...F } } fragment F on Item { name }`},
			want: []string{selectionDiffers},
		},
		{
			name: "fragments on different types under an abstract type",
			a:    request{query: `mutation { deleteItem(id: 1) { id ... on Item { name } } }`},
			b:    request{query: `mutation { deleteItem(id: 1) { id ... on User { name } } }`},
			want: []string{selectionDiffers},
		},
		{
			name: "arguments and selection both differ",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation { createItem(input: {name: "b"}) { name } }`},
			want: []string{argsDiffer, selectionDiffers},
		},
		{
			name: "different mutation field",
			a:    request{query: `mutation { createItem(input: {name: "a"}) { id } }`},
			b:    request{query: `mutation { updateItem(id: "1", input: {name: "a"}) { id } }`},
			want: []string{"mutation (first used for Mutation.createItem)", argsDiffer},
		},
	}
	for _, tt := range tests {
		for _, mode := range modesFor(tt.a, tt.b) {
			t.Run(tt.name+"/"+mode.String(), func(t *testing.T) {
				a := fingerprintOf(t, tt.a, mode)
				b := fingerprintOf(t, tt.b, mode)
				if a == b {
					t.Fatalf("fingerprints are equal, want different:\n a: %s\n b: %s\n canonical: %s",
						tt.a.query, tt.b.query, canonicalText(t, tt.a, mode))
				}
				got := fingerprint.Differences(a.String(), b.String())
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("Differences = %q, want %q\n a: %s\n    %s\n b: %s\n    %s", got, tt.want,
						a, canonicalText(t, tt.a, mode), b, canonicalText(t, tt.b, mode))
				}
			})
		}
	}
}

// TestOfFieldOnly checks that a different root field with the very same
// arguments and selection is still told apart, by Field alone.
func TestOfFieldOnly(t *testing.T) {
	schema, err := gqlparser.LoadSchema(&ast.Source{Input: `
		type Query { ping: Boolean }
		type Mutation { archive(id: ID!): Boolean  restore(id: ID!): Boolean }
	`})
	if err != nil {
		t.Fatal(err)
	}
	of := func(q string) fingerprint.Fingerprint {
		_, f, err := loadField(schema, q)
		if err != nil {
			t.Fatal(err)
		}
		return fingerprint.Of(schema, "Mutation", f, nil, keyArg)
	}
	a := of(`mutation { archive(id: 1) }`)
	b := of(`mutation { restore(id: 1) }`)
	if a.Field != "Mutation.archive" || b.Field != "Mutation.restore" {
		t.Errorf("Field = %q, %q; want Mutation.archive, Mutation.restore", a.Field, b.Field)
	}
	if a.Arguments != b.Arguments || a.Selection != b.Selection {
		t.Errorf("same arguments and selection hash differently: %+v vs %+v", a, b)
	}
	want := []string{"mutation (first used for Mutation.archive)"}
	if got := fingerprint.Differences(a.String(), b.String()); !reflect.DeepEqual(got, want) {
		t.Errorf("Differences = %q, want %q", got, want)
	}
}

func TestCanonicalArgumentsLeavesOutTheKey(t *testing.T) {
	tests := []struct {
		name string
		req  request
	}{
		{"literal key", request{query: `mutation { createItem(idempotencyKey: "secret-key-value", input: {name: "a"}) { id } }`}},
		{"variable key", request{
			query: `mutation ($k: String) { createItem(idempotencyKey: $k, input: {name: "a"}) { id } }`,
			vars:  `{"k": "secret-key-value"}`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op, f, err := loadField(testSchema, tt.req.query)
			if err != nil {
				t.Fatal(err)
			}
			vars, err := decodeVars(testSchema, op, tt.req.vars, jsonNumber)
			if err != nil {
				t.Fatal(err)
			}
			got := fingerprint.CanonicalArguments(testSchema, f, vars, keyArg)
			if strings.Contains(got, keyArg) || strings.Contains(got, "secret-key-value") {
				t.Errorf("CanonicalArguments = %s, contains the key", got)
			}
			if !strings.Contains(got, `"a"`) {
				t.Errorf("CanonicalArguments = %s, lacks the input", got)
			}
			// Without skipArg the key is part of the arguments.
			if all := fingerprint.CanonicalArguments(testSchema, f, vars, ""); !strings.Contains(all, "secret-key-value") {
				t.Errorf("CanonicalArguments without skipArg = %s, lacks the key", all)
			}
		})
	}
}

func TestParseRoundTrips(t *testing.T) {
	tests := []struct {
		name string
		req  request
	}{
		{"create", request{query: `mutation { createItem(input: {name: "a"}) { id name } }`}},
		{"delete", request{query: `mutation { deleteItem(id: 9) { id } }`}},
		{"with variables", request{
			query: `mutation ($in: ItemInput!) { createItem(input: $in) { id } }`,
			vars:  `{"in": {"name": "b", "price": 3}}`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fingerprintOf(t, tt.req, jsonNumber)
			if f.Field == "" || f.Arguments == "" || f.Selection == "" {
				t.Fatalf("fingerprint has an empty part: %+v", f)
			}
			got, ok := fingerprint.Parse(f.String())
			if !ok {
				t.Fatalf("Parse(%q) failed", f.String())
			}
			want := f
			want.ArgumentsSize = 0 // a size, not part of the stored form
			if got != want {
				t.Errorf("Parse(%q) = %+v, want %+v", f.String(), got, want)
			}
			if d := fingerprint.Differences(f.String(), got.String()); d != nil {
				t.Errorf("Differences after a round trip = %q", d)
			}
		})
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	good := fingerprintOf(t, request{query: `mutation { createItem(input: {name: "a"}) { id } }`}, jsonNumber).String()
	tests := []struct {
		name, stored string
	}{
		{"empty", ""},
		{"garbage", "not a fingerprint"},
		{"too few parts", "v1:Mutation.createItem:abc"},
		{"too many parts", "v1:Mutation.createItem:abc:def:ghi:jkl"},
		{"unknown version", "v0" + strings.TrimPrefix(good, "v1")},
		{"no version", strings.TrimPrefix(good, "v1:")},
		{"legacy hex digest", "3f786850e387550fdab836ed7e6dc881de23001b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if f, ok := fingerprint.Parse(tt.stored); ok {
				t.Errorf("Parse(%q) = %+v, true; want false", tt.stored, f)
			}
			want := []string{"request"}
			if got := fingerprint.Differences(tt.stored, good); !reflect.DeepEqual(got, want) {
				t.Errorf("Differences(%q, good) = %q, want %q", tt.stored, got, want)
			}
			if got := fingerprint.Differences(good, tt.stored); !reflect.DeepEqual(got, want) {
				t.Errorf("Differences(good, %q) = %q, want %q", tt.stored, got, want)
			}
		})
	}
}

// TestOfIgnoresUndeclaredVariables checks that variables the operation does
// not declare (clients send them; gqlgen ignores them) change nothing.
func TestOfIgnoresUndeclaredVariables(t *testing.T) {
	q := `mutation ($n: String) { createItem(input: {name: "a"}, note: $n) { id } }`
	tests := []struct {
		name string
		vars string
	}{
		{"undeclared scalar", `{"n": "x", "w": 2.5}`},
		{"undeclared list", `{"n": "x", "zzz": [1, 2]}`},
		{"undeclared variable named like an argument", `{"n": "x", "note": "y", "input": {"name": "b"}}`},
	}
	base := fingerprintOf(t, request{query: q, vars: `{"n": "x"}`}, jsonNumber)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fingerprintOf(t, request{query: q, vars: tt.vars}, jsonNumber)
			if got != base {
				t.Errorf("fingerprint changed: %s vs %s", got, base)
			}
		})
	}
	// Control: the used variable does matter.
	if other := fingerprintOf(t, request{query: q, vars: `{"n": "y"}`}, jsonNumber); other == base {
		t.Errorf("changing the used variable did not change the fingerprint")
	}
}

// A selection of many response names (past the few found by a linear
// search) prints each once, in the order of its first appearance, with the
// sub-selections of its repeats merged.
func TestCanonicalSelectionOfManyNames(t *testing.T) {
	var q, want strings.Builder
	q.WriteString(`mutation { createItem(input: {name: "a"}) { `)
	want.WriteString("{")
	for i := range 40 {
		if i > 0 {
			want.WriteString(",")
		}
		fmt.Fprintf(&q, "a%d: owner { id } ", i)
		fmt.Fprintf(&want, "a%d:owner{id:id,name:name}", i)
	}
	for i := range 40 {
		fmt.Fprintf(&q, "a%d: owner { name } ", i)
	}
	q.WriteString("} }")
	want.WriteString("}")
	_, f, err := loadField(testSchema, q.String())
	if err != nil {
		t.Fatal(err)
	}
	if got := fingerprint.CanonicalSelection(testSchema, f, nil); got != want.String() {
		t.Errorf("CanonicalSelection =\n%s\nwant\n%s", got, want.String())
	}
}
