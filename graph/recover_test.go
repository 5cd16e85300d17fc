package graph_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/ent/payment"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
)

// storedOperation reads the operation the claim of (tenant, key) kept for
// the recoverer.
func (a *app) storedOperation(tenant, key string) (query string, vars map[string]any) {
	a.t.Helper()
	p, err := a.Client.Payment.Query().Where(payment.TenantID(tenant), payment.IdempotencyKey(key)).
		Only(idemschema.IncludeUnfinished(context.Background()))
	if err != nil || p.IdempotencyOperation == nil || len(*p.IdempotencyOperation) == 0 {
		a.t.Fatalf("payment %s: %v %v", key, p, err)
	}
	var op struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.Unmarshal(*p.IdempotencyOperation, &op); err != nil {
		a.t.Fatalf("stored operation %s: %v", *p.IdempotencyOperation, err)
	}
	return op.Query, op.Variables
}

// A claim keeps its field alone as a request that asks for the same thing,
// whatever else the operation held, with the fragments and variables it
// uses, and with a key sent in the header as its argument: run, it
// completes the claim, and the client's own retry then replays that result
// (any other request with the key would be refused as a reuse). The claim
// forgets the operation when it is finished.
func TestClaimKeepsItsOperation(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b)
		order := a.newOrder("acme", 700)
		const pay = `
			fragment P on Payment { amount order { id paid } }
			fragment O on Order { id currency }
			mutation Pay($key: String, $order: ID!, $amount: Int!, $unused: Int!) {
			  other: createOrder(input: {amount: $unused, currency: "EUR"}, idempotencyKey: "kept-order") { ...O }
			  paid: createPayment(idempotencyKey: $key, input: {orderID: $order, amount: $amount}) { id ...P providerChargeID }
			}`
		vars := map[string]any{"key": "kept-1", "order": order, "amount": 700, "unused": 3}
		a.Provider.FailureRate = 1 // the claim is released, pending
		if r := a.do("acme", pay, vars); idemtest.Outcome(t, r.Body, "paid") != idem.OutcomeReleased {
			t.Fatalf("payment with a failing provider: %s", r.Body)
		}
		a.Provider.FailureRate = 0
		query, stored := a.storedOperation("acme", "kept-1")
		if strings.Contains(query, "createOrder") || strings.Contains(query, "fragment O") {
			t.Fatalf("stored operation %s keeps another field", query)
		}
		if _, ok := stored["unused"]; ok {
			t.Fatalf("stored variables %v keep one the field does not use", stored)
		}
		idemtest.RequireExecuted(t, a.do("acme", query, stored).Body, "paid")
		idemtest.RequireReplayed(t, a.do("acme", pay, vars).Body, "paid")
		a.requireNoOperation("acme", "kept-1")

		// The key from the header becomes the stored operation's argument.
		order = a.newOrder("acme", 700)
		a.Provider.FailureRate = 1
		header := http.Header{"Idempotency-Key": {`"kept-2"`}}
		const payByHeader = `mutation($order: ID!) { createPayment(input: {orderID: $order, amount: 700}) { id } }`
		if _, err := a.Send("acme", payByHeader, map[string]any{"order": order}, header); err != nil {
			t.Fatal(err)
		}
		a.Provider.FailureRate = 0
		query, stored = a.storedOperation("acme", "kept-2")
		idemtest.RequireExecuted(t, a.do("acme", query, stored).Body, "createPayment")
		r, err := a.Send("acme", payByHeader, map[string]any{"order": order}, header)
		if err != nil {
			t.Fatal(err)
		}
		idemtest.RequireReplayed(t, r.Body, "createPayment")
	})
}

// requireNoOperation fails unless the record of (tenant, key) has
// forgotten its operation.
func (a *app) requireNoOperation(tenant, key string) {
	a.t.Helper()
	p, err := a.Client.Payment.Query().Where(payment.TenantID(tenant), payment.IdempotencyKey(key)).
		Only(idemschema.IncludeUnfinished(context.Background()))
	if err != nil || (p.IdempotencyOperation != nil && len(*p.IdempotencyOperation) > 0) {
		a.t.Fatalf("payment %s: %v %v, want no operation", key, p, err)
	}
}
