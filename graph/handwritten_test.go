package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/goovo/idem/ent/payment"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/example/counter"
	"github.com/goovo/idem/internal/testkit"
)

const refundPayment = `mutation($key: String, $payment: ID!, $amount: Int!) {
  refundPayment(idempotencyKey: $key, paymentID: $payment, amount: $amount) { id amount payment { id refundedAmount } }
}`

// paidPayment creates an order of amount and pays it; it returns the
// payment's id.
func (a *app) paidPayment(tenant string, amount int) string {
	a.t.Helper()
	order := a.newOrder(tenant, amount)
	r := a.pay(tenant, "pay-"+randomKey(), order, amount)
	var d struct{ CreatePayment struct{ ID string } }
	if err := json.Unmarshal(r.Data, &d); err != nil || d.CreatePayment.ID == "" {
		a.t.Fatalf("pay: %s", r.Body)
	}
	return d.CreatePayment.ID
}

func (a *app) refunded(paymentID string) (refunds, total int) {
	a.t.Helper()
	ctx := idemschema.IncludeUnfinished(context.Background())
	var id int
	_ = json.Unmarshal([]byte(paymentID), &id)
	if id == 0 {
		id = atoi(paymentID)
	}
	p, err := a.Client.Payment.Query().Where(payment.ID(id)).Only(ctx)
	if err != nil {
		a.t.Fatal(err)
	}
	n, err := p.QueryRefunds().Count(context.Background()) // finished refunds only
	if err != nil {
		a.t.Fatal(err)
	}
	return n, p.RefundedAmount
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestRefundPayment(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b)
		p := a.paidPayment("acme", 1000)
		refund := func(key string, amount int) *testkit.Response {
			return a.do("acme", refundPayment, map[string]any{"key": key, "payment": p, "amount": amount})
		}

		first, second := refund("r1", 300), refund("r1", 300)
		if len(first.Errors) > 0 || !bytes.Equal(first.Data, second.Data) || !second.Replayed {
			t.Fatalf("twice with one key:\n%s\n%s", first.Body, second.Body)
		}
		if n, total := a.refunded(p); n != 1 || total != 300 {
			t.Fatalf("after one key twice: %d refunds, %d refunded", n, total)
		}

		// 20 concurrent with one key: one refund, 20 identical answers
		// (atomic mode: duplicates wait and replay).
		results := make([]*testkit.Response, 20)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				r, err := a.Send("acme", refundPayment, map[string]any{"key": "r2", "payment": p, "amount": 300}, nil)
				if err != nil {
					t.Error(err)
				}
				results[i] = r
			})
		}
		wg.Wait()
		for i, r := range results {
			if r == nil || len(r.Errors) > 0 || !bytes.Equal(r.Data, results[0].Data) {
				t.Fatalf("concurrent refund %d: %s vs %s", i, r.Body, results[0].Body)
			}
		}
		if n, total := a.refunded(p); n != 2 || total != 600 {
			t.Fatalf("after 20 concurrent: %d refunds, %d refunded", n, total)
		}

		// Over-refund: a final error, the same on every retry.
		over1, over2 := refund("r3", 500), refund("r3", 500)
		if over1.Code() != "REFUND_EXCEEDS_PAYMENT" || !bytes.Equal(over1.RawErrors, over2.RawErrors) || !over2.Replayed {
			t.Fatalf("over-refund:\n%s\n%s", over1.Body, over2.Body)
		}
		if n, total := a.refunded(p); n != 2 || total != 600 {
			t.Fatalf("after the over-refund: %d refunds, %d refunded", n, total)
		}
		// Another tenant cannot refund it.
		if r := a.do("evil", refundPayment, map[string]any{"key": "r4", "payment": p, "amount": 1}); r.Code() != crossTenantRefusal(b, "NOT_FOUND") {
			t.Fatalf("another tenant's refund: %s", r.Body)
		}
	})
}

func TestKeyInHeaderOrArgument(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b)
		const noKey = `mutation { createOrder(input: {amount: 300, currency: "EUR"}) { id amount } }`
		header := func(key string) http.Header { return http.Header{idemcode.HeaderKey: {key}} }

		byHeader, err := a.Send("acme", noKey, nil, header("h-1"))
		if err != nil || len(byHeader.Errors) > 0 || byHeader.Replayed {
			t.Fatalf("header: %v %s", err, byHeader.Body)
		}
		if got := byHeader.Header.Get(idemcode.HeaderKey); got != "h-1" {
			t.Fatalf("the response does not echo the key: %q", got)
		}
		again, _ := a.Send("acme", noKey, nil, header("h-1"))
		byArgument := a.do("acme", `mutation { createOrder(idempotencyKey: "h-1", input: {amount: 300, currency: "EUR"}) { id amount } }`, nil)
		for _, r := range []*testkit.Response{again, byArgument} {
			if !r.Replayed || !bytes.Equal(r.Data, byHeader.Data) {
				t.Fatalf("header and argument forms differ:\n%s\n%s", byHeader.Body, r.Body)
			}
		}
		if r, _ := a.Send("acme", `mutation { createOrder(input: {amount: 301, currency: "EUR"}) { id amount } }`, nil, header("h-1")); r.Code() != string(idemcode.KeyReused) {
			t.Fatalf("reused by header: %s", r.Body)
		}

		orders := func() int {
			n, err := a.Client.Order.Query().Count(idemschema.IncludeUnfinished(context.Background()))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := orders()
		conflict, _ := a.Send("acme", `mutation { createOrder(idempotencyKey: "arg-key", input: {amount: 1, currency: "EUR"}) { id } }`, nil, header("header-key"))
		if conflict.Code() != string(idemcode.KeyInvalid) || !strings.Contains(conflict.Errors[0].Message, "differ") {
			t.Fatalf("conflicting header and argument: %s", conflict.Body)
		}
		two, err := a.Send("acme", `mutation { a: createOrder(input: {amount: 1, currency: "EUR"}) { id } b: createOrder(input: {amount: 2, currency: "EUR"}) { id } }`, nil, header("h-2"))
		if err != nil || two.Code() != string(idemcode.KeyInvalid) {
			t.Fatalf("one header for two fields: %v", err)
		}
		if two.Code() != string(idemcode.KeyInvalid) {
			t.Fatalf("one header for two fields: %s", two.Body)
		}
		if after := orders(); after != before {
			t.Fatalf("a rejected request stored %d orders", after-before)
		}
		if r := a.do("acme", noKey, nil); r.Code() != string(idemcode.KeyMissing) {
			t.Fatalf("no key at all: %s", r.Body)
		}
		if r, err := a.Send("acme", noKey, nil, header("clé")); err != nil || r.Code() != string(idemcode.KeyInvalid) {
			t.Fatalf("invalid key in the header: %s", r.Body)
		}
	})
}

func TestSeveralIdempotentFieldsInOneOperation(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b)
		const both = `mutation($a: String!, $b: String!, $amountB: Int!, $v: String = "k-v") {
			first: createOrder(idempotencyKey: $a, input: {amount: 100, currency: "EUR"}) { id amount }
			view: recordPageView(idempotencyKey: $v, page: "/home")
			second: createOrder(idempotencyKey: $b, input: {amount: $amountB, currency: "EUR"}) { id amount }
		}`
		r1 := a.do("acme", both, map[string]any{"a": "k-a", "b": "k-b", "amountB": 200})
		r2 := a.do("acme", both, map[string]any{"a": "k-a", "b": "k-b", "amountB": 200})
		if len(r1.Errors) > 0 || r1.Replayed || !bytes.Equal(r1.Data, r2.Data) || !r2.Replayed {
			t.Fatalf("each field its own key:\n%s\n%s", r1.Body, r2.Body)
		}
		// first is replayed, second is new and fails: its error is there.
		r3 := a.do("acme", both, map[string]any{"a": "k-a", "b": "k-c", "amountB": 0})
		ext := r3.Extensions["idempotency"].(map[string]any)
		if ext["first"].(map[string]any)["outcome"] != idemcode.OutcomeReplayed || ext["second"].(map[string]any)["outcome"] != idemcode.OutcomeExecuted {
			t.Fatalf("outcomes: %s", r3.Body)
		}
		if len(r3.Errors) != 1 || r3.Errors[0].Code() != "BAD_USER_INPUT" || r3.Errors[0].Path[0] != "second" || r3.Replayed {
			t.Fatalf("the replay of one field hid the other's error: %s", r3.Body)
		}
	})
}

// The article's counter, in process: duplicates of a view's key count once,
// and a fold interrupted before its commit counts nothing.
func TestPageViewsCountEachKeyOnce(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b)
		view := func(key string) *testkit.Response {
			return a.do("acme", `mutation($k: String) { recordPageView(idempotencyKey: $k, page: "/pricing") }`, map[string]any{"k": key})
		}
		for i := range 30 {
			if r := view("view-" + string(rune('a'+i%20))); len(r.Errors) > 0 {
				t.Fatalf("view: %s", r.Body)
			}
		}
		// A fold whose transaction is cancelled before the commit leaves
		// everything unfolded.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := counter.Fold(ctx, a.Client, 100); err == nil {
			t.Fatal("cancelled fold succeeded")
		}
		for {
			n, err := counter.Fold(context.Background(), a.Client, 7)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		r := a.do("acme", `{ pageViews(page: "/pricing") }`, nil)
		if string(r.Data) != `{"pageViews":20}` {
			t.Fatalf("count: %s", r.Body)
		}
		if other := a.do("evil", `{ pageViews(page: "/pricing") }`, nil); string(other.Data) != `{"pageViews":0}` {
			t.Fatalf("another tenant's count: %s", other.Body)
		}
	})
}

// The article's partial success, settled: a payment's attempt charges, then
// is rolled back (its client went away); a competing payment of the order
// wins; the first payment's retry finds the order paid and voids its own
// charge before answering ORDER_ALREADY_PAID, so the customer pays once.
func TestLosingPaymentVoidsItsCharge(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b)
		order := a.newOrder("acme", 900)
		// The first attempt's client gives up after the charge, before
		// its answer.
		a.abandonPayment("loser", order, 900)
		// The abandoned attempt is rolled back and its claim released; the
		// competing payment wins.
		if r := a.pay("acme", "winner", order, 900); len(r.Errors) > 0 {
			t.Fatalf("competing payment: %s", r.Body)
		}
		// Until the server has seen its client gone and released the
		// claim, the retry is told the key is in progress.
		var retry *testkit.Response
		testkit.Eventually(t, func() bool {
			retry = a.pay("acme", "loser", order, 900)
			return retry.Code() != string(idemcode.InProgress)
		}, "the first payment's claim released (its retry told IN_PROGRESS)")
		if retry.Code() != "ORDER_ALREADY_PAID" {
			t.Fatalf("the first payment's retry: %s", retry.Body)
		}
		cs := a.charges("acme", order)
		voided := map[string]bool{}
		for _, c := range cs {
			voided[c.IdempotencyKey] = c.Voided
		}
		if len(cs) != 2 || !voided["loser"] || voided["winner"] {
			t.Fatalf("charges %+v: want the loser's voided and the winner's kept", cs)
		}
	})
}
