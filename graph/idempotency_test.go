package graph_test

// The example application's behaviour: orders, payments and the simulated
// provider, end to end. The protocol's own behaviour, whatever the
// application, is tested on the test application
// (internal/testkit/testapp).

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
)

func TestRetryReplaysTheFirstResult(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b)
		order := a.newOrder("acme", 1200)

		first := a.pay("acme", "pay-1", order, 1200)
		if len(first.Errors) > 0 || first.Replayed {
			t.Fatalf("first call: %s", first.Body)
		}
		idemtest.RequireExecuted(t, first.Body, "createPayment")
		idemtest.RequireState(t, a.Client.IdempotencyBackend(), "acme", "pay-1", idemtest.Succeeded)
		second := a.pay("acme", "pay-1", order, 1200)
		idemtest.RequireReplayed(t, second.Body, "createPayment")
		if !bytes.Equal(first.Data, second.Data) {
			t.Fatalf("replay differs:\nfirst:  %s\nsecond: %s", first.Data, second.Data)
		}
		if !second.Replayed {
			t.Fatalf("replay not marked with %s: %v", idemcode.HeaderReplayed, second.Header)
		}
		if got := second.Extensions["idempotency"].(map[string]any)["createPayment"].(map[string]any)["replayed"]; got != true {
			t.Fatalf("replay not marked in extensions: %s", second.Body)
		}
		if n := a.allPayments(); n != 1 {
			t.Fatalf("%d payments, want 1", n)
		}
		cs := a.charges("acme", order)
		if len(cs) != 1 || cs[0].Requests != 1 {
			t.Fatalf("provider charges = %+v, want one charge reached once", cs)
		}
		if !strings.Contains(string(first.Data), `"paid":true`) {
			t.Fatalf("order not paid: %s", first.Data)
		}
	})
}

func TestConcurrentDuplicatesRunOnce(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b)
		a.Provider.Latency = 50 * time.Millisecond
		order := a.newOrder("acme", 500)

		const n = 50
		responses := make([]*testkit.Response, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var err error
				responses[i], err = a.Send("acme", createPayment, map[string]any{"key": "storm", "order": order, "amount": 500}, nil)
				if err != nil {
					t.Errorf("request %d: %v", i, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}

		final := a.pay("acme", "storm", order, 500) // after the storm: the result
		if len(final.Errors) > 0 {
			t.Fatalf("after the storm: %s", final.Body)
		}
		results, inProgress := 0, 0
		for i, r := range responses {
			switch {
			case len(r.Errors) == 0 && bytes.Equal(r.Data, final.Data):
				results++
			case r.Code() == string(idemcode.InProgress) && len(r.Errors) == 1:
				inProgress++
			default:
				t.Errorf("response %d is neither the result nor IDEMPOTENCY_IN_PROGRESS: %s", i, r.Body)
			}
		}
		if results == 0 {
			t.Errorf("no response carried the result")
		}
		t.Logf("%s: %d results, %d in progress", b, results, inProgress)
		if n := a.allPayments(); n != 1 {
			t.Fatalf("%d payments, want 1", n)
		}
		cs := a.charges("acme", order)
		if len(cs) != 1 || cs[0].Requests != 1 {
			t.Fatalf("provider charges = %+v, want one charge reached once", cs)
		}
	})
}

func TestKeysAreScopedByTenant(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b)
		orderA := a.newOrder("tenant-a", 100)
		orderB := a.newOrder("tenant-b", 200)

		ra := a.pay("tenant-a", "same-key", orderA, 100)
		rb := a.pay("tenant-b", "same-key", orderB, 200)
		if len(ra.Errors) > 0 || len(rb.Errors) > 0 || rb.Replayed {
			t.Fatalf("same key in two tenants:\nA: %s\nB: %s", ra.Body, rb.Body)
		}
		if bytes.Equal(ra.Data, rb.Data) {
			t.Fatal("tenant B got tenant A's result")
		}
		if n := a.allPayments(); n != 2 {
			t.Fatalf("%d payments, want 2", n)
		}
		// B's retry replays B's record, never A's.
		if rb2 := a.pay("tenant-b", "same-key", orderB, 200); !bytes.Equal(rb2.Data, rb.Data) || !rb2.Replayed {
			t.Fatalf("tenant B's retry: %s", rb2.Body)
		}
		// B sending A's exact request is refused in B's scope, as a payment
		// of an order that does not exist is: nothing is stored and nothing
		// runs.
		steal := a.pay("tenant-b", "other-key", orderA, 100)
		if want := crossTenantRefusal(b, "NOT_FOUND"); steal.Code() != want {
			t.Fatalf("tenant B paying tenant A's order: %s", steal.Body)
		}
		read := a.do("tenant-b", `query($id: ID!) { order(id: $id) { id } providerCharges(orderID: $id) { id } }`, map[string]any{"id": orderA})
		if string(read.Data) != `{"order":null,"providerCharges":[]}` {
			t.Fatalf("tenant B reads tenant A's order: %s", read.Body)
		}
		if cs := a.charges("tenant-a", orderA); len(cs) != 1 {
			t.Fatalf("tenant A's order has %d charges, want 1", len(cs))
		}
	})
}

func TestFinalErrorIsStoredAndReplayed(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b)
		order := a.newOrder("acme", 100)

		first := a.pay("acme", "bad", order, 0)
		if first.Code() != "BAD_USER_INPUT" || first.Replayed {
			t.Fatalf("amount 0: %s", first.Body)
		}
		second := a.pay("acme", "bad", order, 0)
		if !bytes.Equal(second.RawErrors, first.RawErrors) || !bytes.Equal(second.Data, first.Data) || !second.Replayed {
			t.Fatalf("final error not replayed:\nfirst:  %s\nsecond: %s", first.Body, second.Body)
		}
		// No business rows: the order is unpaid, nothing was charged, no
		// payment is visible; only the failed record exists.
		read := a.do("acme", `query($id: ID!) { order(id: $id) { paid payments { id } } }`, map[string]any{"id": order})
		if string(read.Data) != `{"order":{"paid":false,"payments":[]}}` {
			t.Fatalf("business rows left behind: %s", read.Body)
		}
		if cs := a.charges("acme", order); len(cs) != 0 {
			t.Fatalf("provider charged: %+v", cs)
		}
		idemtest.RequireState(t, a.Client.IdempotencyBackend(), "acme", "bad", idemtest.Failed)
	})
}

func TestBusinessRuleRollsBackWrites(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b)
		order := a.newOrder("acme", 100)
		if r := a.pay("acme", "p1", order, 100); len(r.Errors) > 0 {
			t.Fatalf("first payment: %s", r.Body)
		}
		// A second intent for the same order: the rule fails after the
		// resolver marked nothing; it is final and replayed.
		r1 := a.pay("acme", "p2", order, 100)
		r2 := a.pay("acme", "p2", order, 100)
		if r1.Code() != "ORDER_ALREADY_PAID" || !bytes.Equal(r1.RawErrors, r2.RawErrors) || !r2.Replayed {
			t.Fatalf("second intent:\n%s\n%s", r1.Body, r2.Body)
		}
		if cs := a.charges("acme", order); len(cs) != 1 {
			t.Fatalf("%d charges, want 1", len(cs))
		}
	})
}
