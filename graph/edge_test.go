package graph_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
)

// The Idempotency-Key header in the IETF draft's form (a structured-field
// String) and in Stripe's bare form names the same key; the response echoes
// it in the form it came in. A list, parameters or the header twice are
// refused before anything runs.
func TestIdempotencyKeyHeaderForms(t *testing.T) {
	a := newApp(t, idemtest.SQLite)
	const noKey = `mutation { createOrder(input: {amount: 300, currency: "EUR"}) { id amount } }`
	send := func(values ...string) *testkit.Response {
		t.Helper()
		r, err := a.Send("acme", noKey, nil, http.Header{idem.HeaderKey: values})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	quoted := send(`"8e03978e-40d5"`)
	if len(quoted.Errors) > 0 || quoted.Header.Get(idem.HeaderKey) != `"8e03978e-40d5"` {
		t.Fatalf("quoted: %s (echo %q)", quoted.Body, quoted.Header.Get(idem.HeaderKey))
	}
	bare := send(`8e03978e-40d5`)
	if !bare.Replayed || !bytes.Equal(bare.Data, quoted.Data) || bare.Header.Get(idem.HeaderKey) != "8e03978e-40d5" {
		t.Fatalf("the bare form is another key: %s (echo %q)", bare.Body, bare.Header.Get(idem.HeaderKey))
	}
	byArgument := a.do("acme", `mutation { createOrder(idempotencyKey: "8e03978e-40d5", input: {amount: 300, currency: "EUR"}) { id amount } }`, nil)
	if !byArgument.Replayed || byArgument.Header.Get(idem.HeaderKey) != `"8e03978e-40d5"` {
		t.Fatalf("argument: %s (echo %q)", byArgument.Body, byArgument.Header.Get(idem.HeaderKey))
	}
	escaped := send(`"say \"hi\""`)
	if len(escaped.Errors) > 0 || escaped.Header.Get(idem.HeaderKey) != `"say \"hi\""` {
		t.Fatalf("escapes: %s (echo %q)", escaped.Body, escaped.Header.Get(idem.HeaderKey))
	}
	before := a.allOrders()
	for _, values := range [][]string{{`"a", "b"`}, {"a, b"}, {`"a";x=1`}, {`"a"`, `"a"`}, {`"unterminated`}} {
		if r := send(values...); r.Code() != string(idem.CodeKeyInvalid) || r.Header.Get(idem.HeaderKey) != "" {
			t.Errorf("%q: %s", values, r.Body)
		}
	}
	if after := a.allOrders(); after != before {
		t.Fatalf("refused headers stored %d orders", after-before)
	}
}

// Tenant B learns nothing of tenant A's ids: paying (or refunding) an id
// of A's is answered exactly as an id that does not exist, byte for byte,
// and stores nothing, so that the second probe, with the same key, gets the
// same bytes again.
func TestNoExistenceOracleAcrossTenants(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b)
		ordersOfA := a.newOrder("tenant-a", 100)
		paymentOfA := a.paidPayment("tenant-a", 100)
		probes := []struct {
			name, query string
			vars        func(id string) map[string]any
			real        string
		}{
			{"payment", createPayment, func(id string) map[string]any { return map[string]any{"key": "probe", "order": id, "amount": 100} }, ordersOfA},
			{"refund", refundPayment, func(id string) map[string]any { return map[string]any{"key": "probe", "payment": id, "amount": 1} }, paymentOfA},
		}
		for _, p := range probes {
			none := a.do("tenant-b", p.query, p.vars("987654"))
			real := a.do("tenant-b", p.query, p.vars(p.real))
			if none.Code() != string(idem.CodeBadInput) || !bytes.Equal(none.Body, real.Body) {
				t.Fatalf("%s: an id that does not exist and one of another tenant are told apart:\n%s\n%s", p.name, none.Body, real.Body)
			}
		}
		if n := a.allPayments(); n != 1 {
			t.Fatalf("%d payments, want tenant A's only", n)
		}
	})
}

// The example's provider failing is an unexpected error: the client gets
// INTERNAL_SERVER_ERROR, retryable, with a correlation id and not the
// provider's words, which the log has under that id.
func TestProviderFailureIsAnInternalError(t *testing.T) {
	logs := &syncBuffer{}
	a := newApp(t, idemtest.SQLite, func(o *graph.Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	order := a.newOrder("acme", 100)
	a.Provider.FailureRate = 1
	r := a.pay("acme", "fails", order, 100)
	if r.Code() != string(idem.CodeInternal) || strings.Contains(string(r.Body), "provider") {
		t.Fatalf("provider failure: %s", r.Body)
	}
	id, _ := r.Errors[0].Extensions["correlationId"].(string)
	if id == "" || !strings.Contains(logs.String(), "correlation_id="+id) {
		t.Fatalf("correlation id %q not in the log:\n%s", id, logs)
	}
	a.Provider.FailureRate = 0
	if r := a.pay("acme", "fails", order, 100); len(r.Errors) > 0 {
		t.Fatalf("retry: %s", r.Body)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The edges of an idempotent mutation's result are read in its
// transaction, on one connection, while gqlgen resolves sibling fields
// concurrently: the hook runs them one at a time. Concurrently, pgx
// answered "conn busy" or panicked in its rows, and the payment failed.
func TestSiblingEdgesShareTheTransaction(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b)
		for round := range 3 {
			order := a.newOrder("acme", 100)
			var sel strings.Builder
			for i := range 30 {
				fmt.Fprintf(&sel, " o%d: order { id paid payments { id amount order { id } } }", i)
			}
			r := a.do("acme", fmt.Sprintf(`mutation { createPayment(idempotencyKey: "edges-%d", input: {orderID: %s, amount: 100}) { id %s } }`,
				round, order, sel.String()), nil)
			if len(r.Errors) > 0 || !strings.Contains(string(r.Data), `"o29":{"id":"`+order+`","paid":true`) {
				t.Fatalf("round %d: %.500s", round, r.Body)
			}
		}
	})
}

// Tenant B cannot tell another tenant's ids from ids that do not exist by
// what a probe costs either. A reference to no row went on to the insert,
// which the foreign key refused (an insert, its failure and a rollback:
// 0.4 ms more than a reference to another tenant's row on PostgreSQL,
// which a query refused before the insert), and it consumed an id of the
// sequence, which the next row's id showed. Both are now refused by the
// same query before the insert: neither consumes an id.
func TestNoTimingOracleAcrossTenants(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b)
		orderOfA := a.newOrder("tenant-a", 100)
		paymentOfA := a.paidPayment("tenant-a", 100)
		for i := range 3 {
			for _, id := range []string{"987654", orderOfA} {
				a.do("tenant-b", createPayment, map[string]any{"key": fmt.Sprint("probe-", i), "order": id, "amount": 100})
			}
			for _, id := range []string{"987654", paymentOfA} {
				a.do("tenant-b", refundPayment, map[string]any{"key": fmt.Sprint("probe-", i), "payment": id, "amount": 1})
			}
		}
		paymentOfB := a.paidPayment("tenant-b", 100)
		if atoi(paymentOfB) != atoi(paymentOfA)+1 {
			t.Errorf("tenant B's payment is %s after tenant A's %s: the probes reached the insert", paymentOfB, paymentOfA)
		}
		r := a.do("tenant-b", refundPayment, map[string]any{"key": "refund", "payment": paymentOfB, "amount": 1})
		var d struct{ RefundPayment struct{ ID string } }
		if err := json.Unmarshal(r.Data, &d); err != nil || d.RefundPayment.ID != "1" {
			t.Errorf("the first refund is %q, want 1: the probes reached the insert (%s)", d.RefundPayment.ID, r.Body)
		}
	})
}
