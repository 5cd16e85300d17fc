package idem

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
// the fragments it uses, and the values of the variables it uses alone. A
// key sent in the header becomes the key argument of each request's own
// query.
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
		wantQuery string
		wantVars  map[string]any
	}{
		{doc, map[string]any{"k": "key-1", "name": "first", "unused": 3, "note": "x"}, "key-1",
			"mutation ($k: String!, $name: String!, $note: String = \"n\") {\na: createItem(idempotencyKey: $k, input: {name:$name,note:$note}) {\nid\n... parts\n}\n}\nfragment parts on Item {\nname\nnote\n}\n",
			map[string]any{"k": "key-1", "name": "first", "note": "x"}},
		{doc, map[string]any{"k": "key-2", "name": "<second>"}, "key-2", "",
			map[string]any{"k": "key-2", "name": "<second>"}},
		{headerDoc, map[string]any{"name": "h"}, "header-1",
			"mutation ($name: String!) {\ncreateItem(input: {name:$name}, idempotencyKey: \"header-1\") {\nid\n}\n}\n",
			map[string]any{"name": "h"}},
		{headerDoc, map[string]any{"name": "h"}, "header-2", "", map[string]any{"name": "h"}},
	} {
		oc := &graphql.OperationContext{Doc: tc.doc, Operation: tc.doc.Operations[0], Variables: tc.vars}
		got := cache.of(oc, field(tc.doc), tc.key)
		if fresh := operationOf(oc, field(tc.doc), tc.key); !bytes.Equal(got, fresh) {
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
		if tc.key != "" && tc.doc == headerDoc && !bytes.Contains([]byte(op.Query), []byte(tc.key)) {
			t.Errorf("%d: the header's key %s is not in the query %s", i, tc.key, op.Query)
		}
		if g, w := mustJSON(t, op.Variables), mustJSON(t, tc.wantVars); g != w {
			t.Errorf("%d: variables %s, want %s", i, g, w)
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
