package idemhttp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemhttp"
)

// A document OperationLimits let through is remembered: sent again (a
// retry, the same operation with other variables), it costs a hash and a
// lookup, no allocation, where measuring it parses it again. A document
// it refused is measured again, and refused again.
func TestKnownDocumentsAreNotMeasuredAgain(t *testing.T) {
	limits := idemhttp.NewOperationLimits(idemhttp.Limits{})
	ctx := context.Background()
	query := `mutation($k: String!) { createOrder(idempotencyKey: $k, input: {amount: 100, currency: "EUR"}) { id amount currency paid } }`
	check := func(q string) *gqlerror.Error {
		return limits.MutateOperationParameters(ctx, &graphql.RawParams{Query: q})
	}
	if err := check(query); err != nil {
		t.Fatal(err)
	}
	// New documents: the same with more white space.
	news := []string{query + " ", query + "  "}
	first := testing.AllocsPerRun(1, func() { _, news = check(news[0]), news[1:] })
	again := testing.AllocsPerRun(100, func() { _ = check(query) })
	if first == 0 || again != 0 {
		t.Fatalf("%v allocations measuring a document, %v checking it again", first, again)
	}

	over := "{" + strings.Repeat(" __typename", idemhttp.DefaultMaxFields+1) + " }"
	for range 2 {
		if err := check(over); err == nil || err.Extensions["code"] != string(idemcode.OperationLimitExceeded) {
			t.Fatalf("over the limit: %v", err)
		}
	}
}

// BenchmarkOperationLimits measures what OperationLimits costs a request:
// known, a document it let through before (every request of an operation
// sent with variables, after its first); new, one it has not seen (a
// document with its literals written in, each time another), which it
// parses and measures before gqlgen parses and validates it again.
func BenchmarkOperationLimits(b *testing.B) {
	limits := idemhttp.NewOperationLimits(idemhttp.Limits{})
	ctx := context.Background()
	query := `mutation($k: String!) { createOrder(idempotencyKey: $k, input: {amount: 100, currency: "EUR"}) { id amount currency paid } }`
	b.Run("known", func(b *testing.B) {
		b.ReportAllocs()
		p := &graphql.RawParams{Query: query}
		for b.Loop() {
			if err := limits.MutateOperationParameters(ctx, p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		queries := make([]string, b.N)
		for i := range queries {
			queries[i] = fmt.Sprintf(`mutation { createOrder(idempotencyKey: "k-%d", input: {amount: 100, currency: "EUR"}) { id amount currency paid } }`, i)
		}
		b.ResetTimer()
		for i := range b.N {
			if err := limits.MutateOperationParameters(ctx, &graphql.RawParams{Query: queries[i]}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
