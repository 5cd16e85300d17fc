package fingerprint_test

import (
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/goovo/idem/internal/fingerprint"
)

const excludeSDL = `
type Query { ping: Boolean }
input LineInput { sku: String! addedAt: String }
input OrderInput { amount: Int! clientTime: String lines: [LineInput!] meta: MetaInput }
input MetaInput { sdk: String trace: String }
type Order { id: ID! }
type Mutation { createOrder(idempotencyKey: String, input: OrderInput!, token: String): Order }
`

// TestOfLeavesOutExcludedPaths: a field that changes on every retry (a
// client timestamp, a rotated token, an element's time in a list) does not
// change the fingerprint once its path is left out; every other field still
// does, and without exclusions the fingerprint is what it always was.
func TestOfLeavesOutExcludedPaths(t *testing.T) {
	schema, err := gqlparser.LoadSchema(&ast.Source{Name: "x.graphql", Input: excludeSDL})
	if err != nil {
		t.Fatal(err)
	}
	fp := func(query string, leaveOut ...string) string {
		t.Helper()
		_, field, err := loadField(schema, query)
		if err != nil {
			t.Fatal(err)
		}
		return fingerprint.Of(schema, "Mutation", field, nil, append([]string{keyArg}, leaveOut...)...).String()
	}
	const sel = `{ id }`
	base := `mutation { createOrder(idempotencyKey: "k", token: "t1", input: {amount: 5, clientTime: "10:00", lines: [{sku: "a", addedAt: "1"}], meta: {sdk: "1.0", trace: "x"}}) ` + sel + ` }`
	retry := `mutation { createOrder(idempotencyKey: "k", token: "t2", input: {amount: 5, clientTime: "10:01", lines: [{sku: "a", addedAt: "2"}], meta: {sdk: "1.0", trace: "y"}}) ` + sel + ` }`
	omitted := `mutation { createOrder(idempotencyKey: "k", input: {amount: 5, lines: [{sku: "a"}], meta: {sdk: "1.0"}}) ` + sel + ` }`
	other := `mutation { createOrder(idempotencyKey: "k", token: "t2", input: {amount: 6, clientTime: "10:01", lines: [{sku: "a", addedAt: "2"}], meta: {sdk: "1.0", trace: "y"}}) ` + sel + ` }`
	otherSku := `mutation { createOrder(idempotencyKey: "k", token: "t2", input: {amount: 5, clientTime: "10:01", lines: [{sku: "b", addedAt: "2"}], meta: {sdk: "1.0", trace: "y"}}) ` + sel + ` }`
	excl := []string{"token", "input.clientTime", "input.lines.addedAt", "input.meta.trace"}

	if fp(base) == fp(retry) {
		t.Fatal("without exclusions, changed fields must change the fingerprint")
	}
	if fp(base) != fp(base, "input.nothingLikeThis") {
		t.Fatal("a path that matches nothing must leave the fingerprint as it was")
	}
	if a, b := fp(base, excl...), fp(retry, excl...); a != b {
		t.Fatalf("changed excluded fields changed the fingerprint: %s vs %s", a, b)
	}
	if a, b := fp(base, excl...), fp(omitted, excl...); a != b {
		t.Fatalf("omitted excluded fields changed the fingerprint: %s vs %s", a, b)
	}
	if fp(base, excl...) == fp(other, excl...) {
		t.Fatal("a changed field that is not excluded (input.amount) must change the fingerprint")
	}
	if fp(base, excl...) == fp(otherSku, excl...) {
		t.Fatal("a changed field beside an excluded one in a list (lines.sku) must change the fingerprint")
	}
	// The whole of input.meta, left out.
	metaOnly := strings.Replace(base, `sdk: "1.0"`, `sdk: "2.0"`, 1)
	if fp(base, "input.meta") != fp(metaOnly, "input.meta") || fp(base, "input.meta.trace") == fp(metaOnly, "input.meta.trace") {
		t.Fatal("leaving out input.meta must leave out all of it, and input.meta.trace only the trace")
	}
}

// TestCheckPaths: a path that does not exist is refused with its reason.
func TestCheckPaths(t *testing.T) {
	schema, err := gqlparser.LoadSchema(&ast.Source{Name: "x.graphql", Input: excludeSDL})
	if err != nil {
		t.Fatal(err)
	}
	f := schema.Mutation.Fields.ForName("createOrder")
	if err := fingerprint.CheckPaths(schema, f, []string{"token", "input.clientTime", "input.lines.addedAt", "input.meta"}); err != nil {
		t.Fatalf("valid paths refused: %v", err)
	}
	for path, want := range map[string]string{
		"input.clientTme":    "OrderInput) has no field clientTme",
		"inpt.clientTime":    "createOrder has no argument inpt",
		"token.x":            "token is a String, not an input object",
		"input..clientTime":  "is not a path",
		"input.lines.nosuch": "input.lines (LineInput) has no field nosuch",
	} {
		err := fingerprint.CheckPaths(schema, f, []string{path})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: got %v, want an error naming the path and %q", path, err, want)
		}
	}
}

// BenchmarkOfLeavingOut measures the fingerprint of a create with a nested
// input, leaving out the key alone (every mutation) and the key with
// excluded input fields, side by side.
func BenchmarkOfLeavingOut(b *testing.B) {
	schema, err := gqlparser.LoadSchema(&ast.Source{Name: "x.graphql", Input: excludeSDL})
	if err != nil {
		b.Fatal(err)
	}
	_, field, err := loadField(schema, `mutation { createOrder(idempotencyKey: "k", token: "t1", input: {amount: 5, clientTime: "10:00",
		lines: [{sku: "a", addedAt: "1"}, {sku: "b", addedAt: "2"}], meta: {sdk: "1.0", trace: "x"}}) { id } }`)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		leaveOut []string
	}{
		{"key", []string{keyArg}},
		{"key+exclusions", []string{keyArg, "token", "input.clientTime", "input.lines.addedAt"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				fingerprint.Of(schema, "Mutation", field, nil, c.leaveOut...)
			}
		})
	}
}
