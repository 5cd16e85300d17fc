package graph_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
)

// orderFields selects createOrder(idempotencyKey: $key, …) with each
// selection, under one response name (each a copy of the field).
func orderFields(selections ...string) string {
	var b strings.Builder
	b.WriteString("mutation($key: String!) {\n")
	for _, s := range selections {
		b.WriteString(`  createOrder(idempotencyKey: $key, input: {amount: 100, currency: "EUR"}) ` + s + "\n")
	}
	b.WriteString("}")
	return b.String()
}

// One field selected twice under one response name is fingerprinted,
// stored and replayed as GraphQL executes it: every copy's selection,
// merged. A request that selects more than the key's first request did is
// refused as a reuse, not answered with less than it asked for; one that
// selects the same thing, however it is split into copies, is replayed.
func TestRepeatedFieldIsReplayedWhole(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b)
		whole := orderFields("{ id }", "{ amount currency paid }")

		// The key's first request selected id alone.
		first := a.do("acme", orderFields("{ id }"), map[string]any{"key": "selected-once"})
		idemtest.RequireExecuted(t, first.Body, "createOrder")
		if r := a.do("acme", whole, map[string]any{"key": "selected-once"}); r.Code() != string(idemcode.KeyReused) ||
			!strings.Contains(r.Errors[0].Message, "selection set") {
			t.Fatalf("more fields than the key's first request: %s, want %s", r.Body, idemcode.KeyReused)
		}

		// The key's first request selected the field twice.
		ran := a.do("acme", whole, map[string]any{"key": "selected-twice"})
		idemtest.RequireExecuted(t, ran.Body, "createOrder")
		for _, f := range []string{`"id":`, `"amount":100`, `"currency":"EUR"`, `"paid":false`} {
			if !strings.Contains(string(ran.Data), f) {
				t.Fatalf("first run: %s, want %s", ran.Data, f)
			}
		}
		for _, same := range []string{
			whole,
			orderFields("{ id amount currency paid }"),
			orderFields("{ id }", "{ id amount }", "{ currency paid }"),
		} {
			r := a.do("acme", same, map[string]any{"key": "selected-twice"})
			idemtest.RequireReplayed(t, r.Body, "createOrder")
			if !bytes.Equal(r.Data, ran.Data) {
				t.Fatalf("replay of\n%s\n%s, want %s", same, r.Data, ran.Data)
			}
		}
		// The same fields in another order are other bytes.
		if r := a.do("acme", orderFields("{ amount currency paid }", "{ id }"), map[string]any{"key": "selected-twice"}); r.Code() != string(idemcode.KeyReused) {
			t.Fatalf("the fields in another order: %s, want %s", r.Body, idemcode.KeyReused)
		}
	})
}

// A stored error of a field selected twice points, on replay, at the
// first copy of the field in the replaying request's own document.
func TestRepeatedFieldErrorsPointIntoThisRequest(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b)
		order := a.newOrder("acme", 800)
		if r := a.pay("acme", "paid-first", order, 800); len(r.Errors) > 0 {
			t.Fatalf("payment: %s", r.Body)
		}
		vars := map[string]any{"key": "paid-twice", "order": order}
		const field = `createPayment(idempotencyKey: $key, input: {orderID: $order, amount: 800})`
		first := a.do("acme", "mutation($key: String!, $order: ID!) {\n  "+field+" { id }\n  "+field+" { amount providerChargeID }\n}", vars)
		if first.Code() != "ORDER_ALREADY_PAID" || !strings.Contains(string(first.Body), `"locations":[{"line":2,"column":3}]`) {
			t.Fatalf("first: %s", first.Body)
		}
		retry := a.do("acme", "mutation($key: String!, $order: ID!) {\n\n\n     again: "+field+" { id amount }\n again: "+field+" { providerChargeID } }", vars)
		idemtest.RequireReplayed(t, retry.Body, "again")
		if !strings.Contains(string(retry.Body), `"path":["again"],"locations":[{"line":4,"column":6}]`) {
			t.Fatalf("replay: %s", retry.Body)
		}
	})
}

// The recoverer runs a field selected twice as the request did: its
// stored result holds what every copy selected (the charge's id too), and
// the client's late retry replays all of it.
func TestRecoveredRepeatedFieldKeepsEveryCopy(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b, recovering(300*time.Millisecond, &syncBuffer{}))
		order := a.newOrder("acme", 600)
		const twice = `mutation($key: String!, $order: ID!) {
		  createPayment(idempotencyKey: $key, input: {orderID: $order, amount: 600}) { id }
		  createPayment(idempotencyKey: $key, input: {orderID: $order, amount: 600}) { amount providerChargeID }
		}`
		vars := map[string]any{"key": "recovered-twice", "order": order}
		a.Provider.FailureRate = 1 // the claim is released, pending
		if r := a.do("acme", twice, vars); idemtest.Outcome(t, r.Body, "createPayment") != idemcode.OutcomeReleased {
			t.Fatalf("payment with a failing provider: %s", r.Body)
		}
		if query, _ := a.storedOperation("acme", "recovered-twice"); !strings.Contains(query, "providerChargeID") {
			t.Fatalf("stored operation %s, want every copy's selection", query)
		}
		a.Provider.FailureRate = 0
		if state := a.awaitFinished("recovered-twice"); state != idemtest.Succeeded {
			t.Fatalf("recovered-twice: %s, want succeeded", state)
		}
		r := a.do("acme", twice, vars)
		idemtest.RequireReplayed(t, r.Body, "createPayment")
		if !strings.Contains(string(r.Data), `"providerChargeID":"ch_`) || !strings.Contains(string(r.Data), `"amount":600`) {
			t.Fatalf("late retry: %s, want the charge's id and the amount", r.Data)
		}
	})
}
