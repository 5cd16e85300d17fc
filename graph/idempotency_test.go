package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
)

// eachBackend runs the behavioural suite's test on SQLite and PostgreSQL.
func eachBackend(t *testing.T, test func(t *testing.T, backend idemtest.Backend)) {
	for _, b := range idemtest.Backends() {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			test(t, b)
		})
	}
}

func TestRetryReplaysTheFirstResult(t *testing.T) {
	eachBackend(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b)
		order := a.newOrder("acme", 1200)

		first := a.pay("acme", "pay-1", order, 1200)
		if len(first.Errors) > 0 || first.replayed() {
			t.Fatalf("first call: %s", first.Body)
		}
		idemtest.RequireExecuted(t, first.Body, "createPayment")
		idemtest.RequireState(t, a.Client.IdempotencyBackend(), "acme", "pay-1", idemtest.Succeeded)
		second := a.pay("acme", "pay-1", order, 1200)
		idemtest.RequireReplayed(t, second.Body, "createPayment")
		if !bytes.Equal(first.Data, second.Data) {
			t.Fatalf("replay differs:\nfirst:  %s\nsecond: %s", first.Data, second.Data)
		}
		if !second.replayed() {
			t.Fatalf("replay not marked with %s: %v", idem.HeaderReplayed, second.Header)
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
	eachBackend(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b)
		a.Provider.Latency = 50 * time.Millisecond
		order := a.newOrder("acme", 500)

		const n = 50
		responses := make([]*response, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var err error
				responses[i], err = a.send("acme", createPayment, map[string]any{"key": "storm", "order": order, "amount": 500}, nil)
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
			case r.code() == string(idem.CodeInProgress) && len(r.Errors) == 1:
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

func TestKeyReusedForAnotherRequest(t *testing.T) {
	eachBackend(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b)
		order := a.newOrder("acme", 700)
		first := a.pay("acme", "k", order, 700)
		if len(first.Errors) > 0 {
			t.Fatalf("first call: %s", first.Body)
		}

		other := a.pay("acme", "k", order, 800)
		if other.code() != string(idem.CodeKeyReused) || !strings.Contains(other.Errors[0].Message, "arguments") {
			t.Fatalf("different amount: %s", other.Body)
		}
		if other.Errors[0].Extensions["idempotencyKey"] != "k" {
			t.Fatalf("error does not carry the key: %s", other.Body)
		}
		narrower := a.do("acme", `mutation { createPayment(idempotencyKey: "k", input: {orderID: `+order+`, amount: 700}) { id } }`, nil)
		if narrower.code() != string(idem.CodeKeyReused) || !strings.Contains(narrower.Errors[0].Message, "selection set") {
			t.Fatalf("different selection: %s", narrower.Body)
		}
		if other.replayed() || narrower.replayed() {
			t.Fatal("a refusal is marked replayed")
		}

		// Nothing changed: the record still replays the first result.
		again := a.pay("acme", "k", order, 700)
		if !bytes.Equal(again.Data, first.Data) {
			t.Fatalf("record changed:\nfirst: %s\nnow:   %s", first.Data, again.Data)
		}
		if n := a.allPayments(); n != 1 {
			t.Fatalf("%d payments, want 1", n)
		}
	})
}

func TestKeysAreScopedByTenant(t *testing.T) {
	eachBackend(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b)
		orderA := a.newOrder("tenant-a", 100)
		orderB := a.newOrder("tenant-b", 200)

		ra := a.pay("tenant-a", "same-key", orderA, 100)
		rb := a.pay("tenant-b", "same-key", orderB, 200)
		if len(ra.Errors) > 0 || len(rb.Errors) > 0 || rb.replayed() {
			t.Fatalf("same key in two tenants:\nA: %s\nB: %s", ra.Body, rb.Body)
		}
		if bytes.Equal(ra.Data, rb.Data) {
			t.Fatal("tenant B got tenant A's result")
		}
		if n := a.allPayments(); n != 2 {
			t.Fatalf("%d payments, want 2", n)
		}
		// B's retry replays B's record, never A's.
		if rb2 := a.pay("tenant-b", "same-key", orderB, 200); !bytes.Equal(rb2.Data, rb.Data) || !rb2.replayed() {
			t.Fatalf("tenant B's retry: %s", rb2.Body)
		}
		// B sending A's exact request is refused in B's scope, as a payment
		// of an order that does not exist is: nothing is stored and nothing
		// runs.
		steal := a.pay("tenant-b", "other-key", orderA, 100)
		if want := crossTenantRefusal(b, "NOT_FOUND"); steal.code() != want {
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

func TestInvalidKeysAreRejectedBeforeAnything(t *testing.T) {
	eachBackend(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b)
		order := a.newOrder("acme", 100)
		for name, key := range map[string]string{
			"empty":          "",
			"256 characters": strings.Repeat("k", 256),
			"control":        "abc\x07def",
			"newline":        "abc\ndef",
			"non-ASCII":      "clé-42",
			"DEL":            "abc\x7f",
		} {
			r := a.pay("acme", key, order, 100)
			if r.code() != string(idem.CodeKeyInvalid) {
				t.Errorf("%s key: %s", name, r.Body)
			}
		}
		if n := a.allPayments(); n != 0 {
			t.Fatalf("%d payments stored for invalid keys", n)
		}
		if cs := a.charges("acme", order); len(cs) != 0 {
			t.Fatalf("provider charged for invalid keys: %+v", cs)
		}
		// The limits are inclusive.
		if r := a.pay("acme", strings.Repeat("k", idem.MaxKeyLength), order, 100); len(r.Errors) > 0 {
			t.Fatalf("255-character key: %s", r.Body)
		}
		// No tenant: nothing runs either.
		if r := a.pay("", "anonymous", order, 100); r.code() != string(idem.CodeUnauthenticated) {
			t.Fatalf("no tenant: %s", r.Body)
		}
		// A key that is not a string is the request's error, before anything.
		if r := a.do("acme", `mutation { createPayment(idempotencyKey: 5, input: {orderID: 1, amount: 1}) { id } }`, nil); len(r.Errors) == 0 {
			t.Fatalf("integer key accepted: %s", r.Body)
		}
		if n := a.allPayments(); n != 1 {
			t.Fatalf("%d payments, want 1", n)
		}
	})
}

func TestFinalErrorIsStoredAndReplayed(t *testing.T) {
	eachBackend(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b)
		order := a.newOrder("acme", 100)

		first := a.pay("acme", "bad", order, 0)
		if first.code() != "BAD_USER_INPUT" || first.replayed() {
			t.Fatalf("amount 0: %s", first.Body)
		}
		second := a.pay("acme", "bad", order, 0)
		if !bytes.Equal(second.RawErrors, first.RawErrors) || !bytes.Equal(second.Data, first.Data) || !second.replayed() {
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
	eachBackend(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b)
		order := a.newOrder("acme", 100)
		if r := a.pay("acme", "p1", order, 100); len(r.Errors) > 0 {
			t.Fatalf("first payment: %s", r.Body)
		}
		// A second intent for the same order: the rule fails after the
		// resolver marked nothing; it is final and replayed.
		r1 := a.pay("acme", "p2", order, 100)
		r2 := a.pay("acme", "p2", order, 100)
		if r1.code() != "ORDER_ALREADY_PAID" || !bytes.Equal(r1.RawErrors, r2.RawErrors) || !r2.replayed() {
			t.Fatalf("second intent:\n%s\n%s", r1.Body, r2.Body)
		}
		if cs := a.charges("acme", order); len(cs) != 1 {
			t.Fatalf("%d charges, want 1", len(cs))
		}
	})
}

func TestStoreDownAnswersUnavailable(t *testing.T) {
	eachBackend(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b)
		order := a.newOrder("acme", 100)

		dsn := "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"
		if b == idemtest.SQLite {
			dsn = "/nonexistent-directory/idem.db"
		}
		drv, err := idemdb.Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		down := ent.NewClient(ent.Driver(drv))
		srv := a.Handler(down, graph.Options{Clock: a.clock})
		a.Server.Config.Handler = srv

		r := a.pay("acme", "pay-down", order, 100)
		if r.code() != string(idem.CodeUnavailable) {
			t.Fatalf("store down: %s", r.Body)
		}
		msg := strings.ToLower(r.Errors[0].Message)
		for _, leak := range []string{"dial", "connect", "refused", "sqlite", "no such", "unable to open"} {
			if strings.Contains(msg, leak) {
				t.Fatalf("database text reached the client: %s", r.Body)
			}
		}
		if cs := a.charges("acme", order); len(cs) != 0 {
			t.Fatalf("the resolver ran: %+v", cs)
		}
	})
}

func TestStoredResponseIsValidJSON(t *testing.T) {
	eachBackend(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b)
		r := a.do("acme", createOrder, map[string]any{"key": "o", "amount": 5, "currency": "USD"})
		var v map[string]any
		if err := json.Unmarshal(r.Data, &v); err != nil || len(r.Errors) > 0 {
			t.Fatalf("%s: %v", r.Body, err)
		}
	})
}

// createOrder runs in atomic mode: 100 concurrent duplicates give exactly
// one order and 100 identical results, none of them IN_PROGRESS.
func TestAtomicCreateOrderDuplicates(t *testing.T) {
	eachBackend(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b)
		const n = 100
		responses := make([]*response, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				r, err := a.send("acme", createOrder, map[string]any{"key": "atomic", "amount": 990, "currency": "EUR"}, nil)
				if err != nil {
					t.Errorf("request %d: %v", i, err)
				}
				responses[i] = r
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
		replays := 0
		for i, r := range responses {
			if len(r.Errors) > 0 || !bytes.Equal(r.Data, responses[0].Data) {
				t.Fatalf("response %d: %s (first: %s)", i, r.Body, responses[0].Body)
			}
			if r.replayed() {
				replays++
			}
		}
		if replays != n-1 {
			t.Fatalf("%d replays, want %d", replays, n-1)
		}
		count, err := a.Client.Order.Query().Count(idemschema.IncludeUnfinished(context.Background()))
		if err != nil || count != 1 {
			t.Fatalf("%d orders (%v), want 1", count, err)
		}
	})
}
