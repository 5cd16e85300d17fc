package engine

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

// The stored operation of a field is the same bytes whether its query was
// formatted for this request or taken from the cache of fields, and is
// what json.Marshal makes of a storedOperation: the field's query, with
// the fragments it uses, and the values of the variables it uses alone,
// and the caller. A key sent in the header becomes the key argument of
// each request's own query, in place of an argument that was null (a
// literal, or a variable, which the query then no longer declares).
func TestStoredOperationFromTheCache(t *testing.T) {
	schema := gqlparser.MustLoadSchema(&ast.Source{Input: `
		type Query { ok: Boolean }
		type Item { id: ID! name: String note: String }
		input ItemInput { name: String! note: String }
		type Mutation {
			createItem(idempotencyKey: String, input: ItemInput!, dryRun: Boolean): Item
			other(x: Int): Int
		}`})
	const query = `mutation first($k: String!, $name: String!, $unused: Int, $note: String = "n") {
		other(x: $unused)
		a: createItem(idempotencyKey: $k, input: {name: $name, note: $note}) { id ...parts }
	}
	mutation second { o: other(x: 1) ... { ...more } }
	fragment parts on Item { name note }
	fragment more on Mutation { other(x: 2) }`
	const headerQuery = `mutation($name: String!) { createItem(input: {name: $name}) { id } }`
	doc := gqlparser.MustLoadQuery(schema, query)
	headerDoc := gqlparser.MustLoadQuery(schema, headerQuery)
	nullDoc := gqlparser.MustLoadQuery(schema, `mutation { createItem(idempotencyKey: null, input: {name: "n"}) { id } }`)
	nullVarDoc := gqlparser.MustLoadQuery(schema, `mutation($k: String, $name: String!) { createItem(idempotencyKey: $k, input: {name: $name}) { id } }`)
	field := func(doc *ast.QueryDocument) *ast.Field {
		for _, sel := range doc.Operations[0].SelectionSet {
			if f := sel.(*ast.Field); f.Name == "createItem" {
				return f
			}
		}
		t.Fatal("no createItem")
		return nil
	}
	var cache operationShapes
	for i, tc := range []struct {
		doc       *ast.QueryDocument
		vars      map[string]any
		key       string
		inHeader  bool
		caller    []byte
		wantQuery string
		wantVars  map[string]any
	}{
		{doc, map[string]any{"k": "key-1", "name": "first", "unused": 3, "note": "x"}, "key-1", false, nil,
			"mutation ($k: String!, $name: String!, $note: String = \"n\") {\na: createItem(idempotencyKey: $k, input: {name:$name,note:$note}) {\nid\n... parts\n}\n}\nfragment parts on Item {\nname\nnote\n}\n",
			map[string]any{"k": "key-1", "name": "first", "note": "x"}},
		{doc, map[string]any{"k": "key-2", "name": "<second>"}, "key-2", false, []byte("user-7"), "",
			map[string]any{"k": "key-2", "name": "<second>"}},
		{headerDoc, map[string]any{"name": "h"}, "header-1", true, nil,
			"mutation ($name: String!) {\ncreateItem(input: {name:$name}, idempotencyKey: \"header-1\") {\nid\n}\n}\n",
			map[string]any{"name": "h"}},
		{headerDoc, map[string]any{"name": "h"}, "header-2", true, nil, "", map[string]any{"name": "h"}},
		{nullDoc, nil, `header "3"`, true, nil,
			"mutation {\ncreateItem(input: {name:\"n\"}, idempotencyKey: \"header \\\"3\\\"\") {\nid\n}\n}\n", nil},
		{nullVarDoc, map[string]any{"k": nil, "name": "v"}, "header-4", true, []byte{0, 1, 2},
			"mutation ($name: String!) {\ncreateItem(input: {name:$name}, idempotencyKey: \"header-4\") {\nid\n}\n}\n",
			map[string]any{"name": "v"}},
	} {
		oc := &graphql.OperationContext{Doc: tc.doc, Operation: tc.doc.Operations[0], Variables: tc.vars}
		got := cache.of(oc, field(tc.doc), true, tc.key, tc.inHeader, tc.caller)
		if fresh := operationOf(oc, field(tc.doc), tc.key, tc.inHeader, tc.caller); !bytes.Equal(got, fresh) {
			t.Errorf("%d: from the cache %s, formatted %s", i, got, fresh)
		}
		var op storedOperation
		if err := json.Unmarshal(got, &op); err != nil {
			t.Fatalf("%d: %s: %v", i, got, err)
		}
		if want, _ := json.Marshal(op); !bytes.Equal(got, want) {
			t.Errorf("%d: %s, json.Marshal makes %s", i, got, want)
		}
		if tc.wantQuery != "" && op.Query != tc.wantQuery {
			t.Errorf("%d: query\n%s\nwant\n%s", i, op.Query, tc.wantQuery)
		}
		if tc.inHeader && !bytes.Contains([]byte(op.Query), []byte(`"`+tc.key[:6])) {
			t.Errorf("%d: the header's key %s is not in the query %s", i, tc.key, op.Query)
		}
		if g, w := string(op.Variables), mustJSON(t, tc.wantVars); g != w && (g != "" || tc.wantVars != nil) {
			t.Errorf("%d: variables %s, want %s", i, g, w)
		}
		if !bytes.Equal(op.Caller, tc.caller) {
			t.Errorf("%d: caller %q, want %q", i, op.Caller, tc.caller)
		}
	}
	if n := len(cache.shapes); n != 1 {
		t.Errorf("%d fields cached, want 1 (a field keyed by the header is not cached)", n)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A field selected more than once under its response name is executed,
// fingerprinted and kept as one field that selects what every copy
// selects; a field selected once is itself, the document's own, which
// the cache of shapes can key on.
func TestExecutedFieldMergesTheCopies(t *testing.T) {
	schema := gqlparser.MustLoadSchema(&ast.Source{Input: `
		type Query { ok: Boolean }
		type Item { id: ID! name: String note: String }
		type Mutation { createItem(idempotencyKey: String, name: String): Item }`})
	doc := gqlparser.MustLoadQuery(schema, `mutation($on: Boolean!) {
		createItem(idempotencyKey: "k", name: "n") { id }
		other: createItem(idempotencyKey: "k2", name: "n") { id }
		... on Mutation { createItem(idempotencyKey: "k", name: "n") { name } }
		createItem(idempotencyKey: "k", name: "n") @include(if: $on) { note }
	}`)
	for _, tc := range []struct {
		on   bool
		want string
	}{
		{true, "mutation {\ncreateItem(idempotencyKey: \"k\", name: \"n\") {\nid\nname\nnote\n}\n}\n"},
		{false, "mutation {\ncreateItem(idempotencyKey: \"k\", name: \"n\") {\nid\nname\n}\n}\n"},
	} {
		oc := &graphql.OperationContext{Doc: doc, Operation: doc.Operations[0], Variables: map[string]any{"on": tc.on}}
		fields := graphql.CollectFields(oc, doc.Operations[0].SelectionSet, []string{"Mutation"})
		if len(fields) != 2 {
			t.Fatalf("%d response names", len(fields))
		}
		merged, single := executedField(fields[0]), executedField(fields[1])
		if merged == fields[0].Field || single != fields[1].Field {
			t.Fatalf("on %v: merged is the first copy: %v; single is a copy: %v", tc.on, merged == fields[0].Field, single != fields[1].Field)
		}
		var op storedOperation
		if err := json.Unmarshal(operationOf(oc, merged, "k", false, nil), &op); err != nil || op.Query != tc.want {
			t.Errorf("on %v: stored query\n%s\nwant\n%s (%v)", tc.on, op.Query, tc.want, err)
		}
	}
}
