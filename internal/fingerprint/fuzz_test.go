package fingerprint_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
	"github.com/vektah/gqlparser/v2/validator"

	"github.com/goovo/idem/internal/fingerprint"
)

// FuzzCanonical checks, for any query that validates against testSchema and
// any variables, that the fingerprint of every root field is computed without
// panicking, is deterministic, and does not change when the document is
// re-printed by the gqlparser formatter (formatting does not change meaning).
func FuzzCanonical(f *testing.F) {
	seeds := []struct{ query, vars string }{
		{`mutation { createItem(idempotencyKey: "k", input: {name: "a"}) { id name } }`, `{}`},
		{`mutation ($in: ItemInput!) { createItem(input: $in) { id price tags } }`,
			`{"in": {"name": "a", "price": 1.0, "tags": "t", "quantity": 3, "priority": "HIGH"}}`},
		{`mutation ($w: Float, $p: ID, $l: [String!]) { createItem(input: {name: "a"}, weight: $w, parentID: $p, labels: $l) { id } }`,
			`{"w": 1e18, "p": 5, "l": ["x", "y"]}`},
		{`mutation ($m: [[Int!]]) { createItem(input: {name: "a"}, matrix: $m) { id } }`, `{"m": 7}`},
		{`mutation ($m: [[Int!]]) { createItem(input: {name: "a"}, matrix: $m) { id } }`, `{"m": [[1, 2], [3], null]}`},
		{`mutation { createItem(input: {tags: ["t"], quantity: 2, price: 1.5, name: "a"}, dryRun: false, note: null) { id } }`, ``},
		{`mutation { createItem(input: {name: "a"}) { ...F owner { ...U } } } fragment F on Item { id name } fragment U on User { id name }`, `{}`},
		{`mutation ($yes: Boolean!) { createItem(input: {name: "a"}) { id name @include(if: $yes) price @skip(if: $yes) ... @include(if: true) { tags } } }`,
			`{"yes": false}`},
		{`mutation { deleteItem(id: 1) { id ... on Item { name related(first: 2, after: "x") { id } } ... on User { userName: name } } }`, `{}`},
		{`mutation ($n: String = "dflt", $q: Int) { a: createItem(input: {name: "a", quantity: $q}, note: $n) { i: id n: name } b: deleteItem(id: "2") { __typename } }`,
			`{"q": null}`},
		{`mutation { createItem(input: {name: """block
		  string"""}, note: "esc \" \\ \u00e9") { id } }`, `{}`},
		{`# comment
		mutation Named { createItem(input: {name: "a", price: -0.0}, weight: 1.5e-7) { id } }`, `{"unused": [1, {"b": 2}]}`},
		{`query { ping }`, `{}`},
	}
	for _, s := range seeds {
		f.Add(s.query, s.vars)
	}
	// A document that is not valid UTF-8 is not GraphQL source text (the
	// spec's SourceCharacter is Unicode); gqlparser still parses some, but
	// its formatter then re-escapes the invalid bytes as other characters,
	// which changes the request: the fingerprint rightly changes with it.
	f.Add("mutation($m:[[Int!]]){createItem(input:{name:\"\x9e\"}matrix:$m){id}}", "{}")
	f.Fuzz(func(t *testing.T, query, varsJSON string) {
		if !utf8.ValidString(query) {
			return
		}
		doc, errs := gqlparser.LoadQuery(testSchema, query)
		if len(errs) > 0 {
			return
		}
		if _, ok := fuzzVars(varsJSON); !ok {
			return
		}
		want := fingerprintsOf(t, doc, varsJSON)

		var buf bytes.Buffer
		formatter.NewFormatter(&buf).FormatQueryDocument(doc)
		doc2, errs := gqlparser.LoadQuery(testSchema, buf.String())
		if len(errs) > 0 {
			t.Fatalf("formatted query does not load: %v\noriginal:\n%s\nformatted:\n%s", errs, query, buf.String())
		}
		got := fingerprintsOf(t, doc2, varsJSON)
		if len(got) != len(want) {
			t.Fatalf("formatted query has %d root fields, original %d\nformatted:\n%s", len(got), len(want), buf.String())
		}
		for k := range want {
			if got[k] != want[k] {
				t.Errorf("fingerprint %s changed by formatting: %s -> %s (%v)\noriginal:\n%s\nformatted:\n%s",
					k, want[k], got[k], fingerprint.Differences(want[k], got[k]), query, buf.String())
			}
		}
	})
}

// fuzzVars decodes a variables JSON object as gqlgen's transports do.
func fuzzVars(s string) (map[string]any, bool) {
	if strings.TrimSpace(s) == "" {
		return nil, true
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var vars map[string]any
	if err := dec.Decode(&vars); err != nil {
		return nil, false
	}
	return vars, true
}

// fingerprintsOf returns the fingerprint of every root field of doc, with the
// variables as decoded and, when they pass gqlparser's coercion, as coerced,
// keyed by operation index, field index and variables form. It fails t if
// computing one twice gives different results.
func fingerprintsOf(t *testing.T, doc *ast.QueryDocument, varsJSON string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i, op := range doc.Operations {
		typeName := "Query"
		if op.Operation == ast.Mutation {
			typeName = "Mutation"
		}
		// Each use decodes afresh: VariableValues writes into its argument.
		raw, _ := fuzzVars(varsJSON)
		forms := map[string]map[string]any{"raw": raw}
		cv, _ := fuzzVars(varsJSON)
		if coerced, err := validator.VariableValues(testSchema, op, cv); err == nil {
			forms["coerced"] = coerced
		}
		n := 0
		for _, sel := range op.SelectionSet {
			field, ok := sel.(*ast.Field)
			if !ok {
				continue
			}
			for form, vars := range forms {
				a := fingerprint.Of(testSchema, typeName, field, vars, keyArg)
				b := fingerprint.Of(testSchema, typeName, field, vars, keyArg)
				if a != b {
					t.Fatalf("fingerprint of %s is not deterministic (%s vars): %s vs %s", field.Name, form, a, b)
				}
				out[fmt.Sprintf("op %d field %d (%s vars)", i, n, form)] = a.String()
			}
			n++
		}
	}
	return out
}
