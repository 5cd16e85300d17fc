package testapp_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/graph"
)

// The benchmarks' hand-written peer (createShipmentHandwritten) is
// retry-safe for what it claims: a key sent twice makes one shipment and
// answers the same data; another key makes another.
func TestHandwrittenCreateAnswersARetryWithItsResponse(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		if err := graph.CreateHandwrittenTable(context.Background(), be.Client); err != nil {
			t.Fatal(err)
		}
		const create = `mutation($k: String!) { createShipmentHandwritten(idempotencyKey: $k, input: {destination: "Lyon", weightGrams: 900}) { id destination weightGrams } }`
		post := func(key string) *testkit.Response {
			r := be.GQL("org-1", create, map[string]any{"k": key})
			if len(r.Errors) > 0 {
				t.Fatalf("%s: %s", key, r.Body)
			}
			return r
		}
		first, second, other := post("hw-1"), post("hw-1"), post("hw-2")
		if !bytes.Equal(first.Data, second.Data) || bytes.Equal(first.Data, other.Data) {
			t.Fatalf("retry and another key:\n%s\n%s\n%s", first.Body, second.Body, other.Body)
		}
		if n := be.Count(); n != 2 {
			t.Fatalf("%d shipments after two keys, want 2", n)
		}
	})
}
