package document

import (
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// What is wrong with a string, for a client; variables nested in lists
// and input objects, their keys too.
func TestWhyUnstorable(t *testing.T) {
	for s, want := range map[string]string{
		"":               "",
		"café 日本":        "",
		"\ufffd":         "",
		"a\x00b":         "a NUL character (U+0000), which the database cannot store",
		"caf\xe9":        "bytes that are not UTF-8",
		"\x00\xff":       "a NUL character (U+0000), which the database cannot store",
		"tab\tnewline\n": "",
	} {
		if got := Why(s); got != want {
			t.Errorf("%q: %q, want %q", s, got, want)
		}
	}
	for _, v := range []any{
		[]any{"ok", map[string]any{"deep": []any{"a\x00"}}},
		map[string]any{"key\x00": "value"},
	} {
		if valueFlaws(v).why() == "" {
			t.Errorf("%#v: not found", v)
		}
	}
	// The worst flaw is named, whatever order the map's keys come in.
	for range 20 {
		if why := valueFlaws(map[string]any{"a": "\xff", "b": "\x00", "c": "\xfe"}).why(); !strings.Contains(why, "NUL") {
			t.Fatalf("a NUL among bytes that are not UTF-8: %q", why)
		}
	}
	if why := valueFlaws(map[string]any{"n": 1, "list": []any{"a", true, nil}}).why(); why != "" {
		t.Errorf("storable values: %q", why)
	}
}

// The operation's literals are checked wherever they are: arguments,
// nested values, directive arguments, fragments and variables' defaults;
// the refusal points at the literal. (gqlparser writes U+FFFD for bytes
// that are not UTF-8 in block strings and in strings with escapes.)
func TestUnstorableLiterals(t *testing.T) {
	for doc, where := range map[string]string{
		`{ a(s: "x\u0000") }`:                                  "the argument s of a",
		`{ a(in: {list: ["ok", "\u0000"]}) }`:                  "the argument in of a",
		`{ a @include(if: true) @tag(name: "\u0000") }`:        "the argument name of @tag",
		`{ ...F } fragment F on Q { a(s: "\u0000") }`:          "the argument s of a",
		`query($v: String = "\u0000") { a(s: $v) }`:            "the default value of $v",
		`{ ... on Q @tag(name: "caf` + "\xe9" + `") { a } }`:   "the argument name of @tag",
		`{ a(s: "ok", t: """ok""") b(in: {x: 1, y: [true]}) }`: "",
	} {
		q, err := parser.ParseQuery(&ast.Source{Input: doc})
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		oc := &graphql.OperationContext{Doc: q, Operation: q.Operations[0], Variables: map[string]any{}}
		got := Arguments(oc)
		switch {
		case where == "" && got != nil:
			t.Errorf("%s: refused: %v", doc, got)
		case where != "" && (got == nil || !strings.HasPrefix(got.Message, where+" holds ") || len(got.Locations) != 1 || got.Extensions["code"] != "BAD_USER_INPUT"):
			t.Errorf("%s: %#v, want a refusal of %s", doc, got, where)
		}
	}
}
