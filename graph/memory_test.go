package graph_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/goovo/idem/idemhttp"
	"github.com/goovo/idem/idemtest"
)

// liveHeap is the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// padded is query followed by a comment that makes it size bytes and
// distinct from every other (n): valid, and under the body limit.
func padded(query string, n, size int) string {
	head := fmt.Sprintf("%s # %d ", query, n)
	return head + strings.Repeat("x", max(size-len(head), 0))
}

// Issue 32: what a client sends is not kept after its answer beyond the
// document cache's budget. 400 distinct valid documents of 1 MB took the
// server from 39 MB to 647 MB, kept for good (gqlgen's LRU of 1,000
// documents); here many small distinct documents, then large ones (a query, and an
// idempotent mutation, whose operation the hook caches too),
// and the live heap afterwards is within the budget and a margin of where
// it started. The backend does not matter: the memory is the process's.
func TestDocumentsAreNotKeptAfterTheirAnswers(t *testing.T) {
	a := newApp(t, idemtest.SQLite)
	order := a.newOrder("acme", 100) // paid 1 (refused, stored) and warm: the first request's one-time allocations
	a.pay("acme", "warm", order, 1)
	before := liveHeap()

	// Under the largest document cached: the budget is what bounds them.
	const small = 40 << 10
	for i := range 1000 {
		r := a.do("acme", padded("{ __typename }", i, small), nil)
		if len(r.Errors) > 0 {
			t.Fatalf("small query: %s", r.Body[:min(len(r.Body), 300)])
		}
	}
	const large = 1000 << 10 // under the 1 MiB body limit, with the JSON around it
	for i := range 60 {
		r := a.do("acme", padded("{ __typename }", i, large), nil)
		if len(r.Errors) > 0 {
			t.Fatalf("large query: %s", r.Body[:min(len(r.Body), 300)])
		}
	}
	for i := range 60 {
		q := `mutation($key: String!, $order: ID!) { createPayment(idempotencyKey: $key, input: {orderID: $order, amount: 1}) { id } }`
		r := a.do("acme", padded(q, i, large), map[string]any{"key": fmt.Sprint("large-", i), "order": order})
		if r.Outcome("createPayment") == "" { // refused, but by the resolver: the hook made its claim
			t.Fatalf("large mutation: %s", r.Body[:min(len(r.Body), 300)])
		}
	}
	after := liveHeap()
	const margin = 16 << 20 // the test's own garbage, pools, the runtime's bookkeeping
	grown := int64(after) - int64(before)
	t.Logf("live heap %d MB before, %d MB after (budget %d MB)", before>>20, after>>20, idemhttp.DefaultDocumentCacheBytes>>20)
	if grown > idemhttp.DefaultDocumentCacheBytes+margin {
		t.Fatalf("the live heap grew by %d MB after the answers: more than the document cache's %d MB and a margin of %d MB",
			grown>>20, idemhttp.DefaultDocumentCacheBytes>>20, margin>>20)
	}
}
