package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemschema"
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
		r, err := a.Send("acme", noKey, nil, http.Header{idemcode.HeaderKey: values})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	quoted := send(`"8e03978e-40d5"`)
	if len(quoted.Errors) > 0 || quoted.Header.Get(idemcode.HeaderKey) != `"8e03978e-40d5"` {
		t.Fatalf("quoted: %s (echo %q)", quoted.Body, quoted.Header.Get(idemcode.HeaderKey))
	}
	bare := send(`8e03978e-40d5`)
	if !bare.Replayed || !bytes.Equal(bare.Data, quoted.Data) || bare.Header.Get(idemcode.HeaderKey) != "8e03978e-40d5" {
		t.Fatalf("the bare form is another key: %s (echo %q)", bare.Body, bare.Header.Get(idemcode.HeaderKey))
	}
	byArgument := a.do("acme", `mutation { createOrder(idempotencyKey: "8e03978e-40d5", input: {amount: 300, currency: "EUR"}) { id amount } }`, nil)
	if !byArgument.Replayed || byArgument.Header.Get(idemcode.HeaderKey) != `"8e03978e-40d5"` {
		t.Fatalf("argument: %s (echo %q)", byArgument.Body, byArgument.Header.Get(idemcode.HeaderKey))
	}
	escaped := send(`"say \"hi\""`)
	if len(escaped.Errors) > 0 || escaped.Header.Get(idemcode.HeaderKey) != `"say \"hi\""` {
		t.Fatalf("escapes: %s (echo %q)", escaped.Body, escaped.Header.Get(idemcode.HeaderKey))
	}
	before := a.allOrders()
	for _, values := range [][]string{{`"a", "b"`}, {"a, b"}, {`"a";x=1`}, {`"a"`, `"a"`}, {`"unterminated`}} {
		if r := send(values...); r.Code() != string(idemcode.KeyInvalid) || r.Header.Get(idemcode.HeaderKey) != "" {
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
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
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
			if none.Code() != string(idemcode.BadUserInput) || !bytes.Equal(none.Body, real.Body) {
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
	if r.Code() != string(idemcode.InternalServerError) || strings.Contains(string(r.Body), "provider") {
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
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
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
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
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

// Text the database cannot store, a NUL character (PostgreSQL refuses it)
// or bytes that are not UTF-8 (which the JSON decoder would change into
// U+FFFD), is BAD_USER_INPUT before anything runs: the same answer, byte
// for byte, on every backend and every retry, nothing stored, the key not
// spent, and no store outage in the log. PostgreSQL answered
// IDEMPOTENCY_UNAVAILABLE (retryable, for ever) and logged an outage;
// SQLite stored the NUL; both stored U+FFFD for a byte that is not UTF-8.
func TestTextTheDatabaseCannotStoreIsBadInput(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		logs := &syncBuffer{}
		a := newApp(t, b, func(o *graph.Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
		const pageView = `mutation($k: String!, $p: String!) { recordPageView(idempotencyKey: $k, page: $p) }`
		const pageViews = `query($p: String!) { pageViews(page: $p) }`
		body := func(query string, vars map[string]any) []byte {
			b, err := json.Marshal(map[string]any{"query": query, "variables": vars})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		cases := []struct {
			name string
			body []byte
			// retry, when set, is the same intent with text that can be
			// stored, sent with the same key afterwards: it runs.
			retry func() *testkit.Response
		}{{
			name: "NUL in a variable of a generated create",
			body: body(createOrder, map[string]any{"key": "nul-variable", "amount": 100, "currency": "EU\x00R"}),
			retry: func() *testkit.Response {
				return a.do("acme", createOrder, map[string]any{"key": "nul-variable", "amount": 100, "currency": "EUR"})
			},
		}, {
			name: "NUL escaped in a literal of a hand-written mutation",
			body: body(`mutation { recordPageView(idempotencyKey: "nul-literal", page: "/a\u0000b") }`, nil),
			retry: func() *testkit.Response {
				return a.do("acme", pageView, map[string]any{"k": "nul-literal", "p": "/ab"})
			},
		}, {
			name: "NUL in a query's variable",
			body: body(pageViews, map[string]any{"p": "/a\x00b"}),
		}, {
			name:  "not UTF-8 in a variable",
			body:  []byte(`{"query":"mutation($k: String!, $p: String!) { recordPageView(idempotencyKey: $k, page: $p) }","variables":{"k":"latin-1","p":"/caf` + "\xe9" + `"}}`),
			retry: func() *testkit.Response { return a.do("acme", pageView, map[string]any{"k": "latin-1", "p": "/café"}) },
		}, {
			name: "not UTF-8 in a literal of the document",
			body: []byte(`{"query":"{ pageViews(page: \"/caf` + "\xe9" + `\") }"}`),
		}}
		for _, c := range cases {
			first := a.postRaw("acme", c.body)
			again := a.postRaw("acme", c.body)
			if first.Code() != string(idemcode.BadUserInput) || !bytes.Equal(first.Body, again.Body) {
				t.Errorf("%s:\n%s\nretry:\n%s", c.name, first.Body, again.Body)
			}
		}
		if n := a.allOrders(); n != 0 {
			t.Errorf("%d orders stored", n)
		}
		if n, err := a.Client.PageView.Query().Count(idemschema.IncludeUnfinished(context.Background())); err != nil || n != 0 {
			t.Errorf("%d page views stored (%v)", n, err)
		}
		for _, c := range cases {
			if c.retry == nil {
				continue
			}
			if r := c.retry(); len(r.Errors) > 0 || r.Outcome(firstField(r)) != idemcode.OutcomeExecuted {
				t.Errorf("%s: the key was spent: %s", c.name, r.Body)
			}
		}
		if strings.Contains(logs.String(), "level=ERROR") {
			t.Errorf("logged as an error:\n%s", logs)
		}
	})
}

// firstField is the response name of the response's only idempotent field.
func firstField(r *testkit.Response) string {
	for name := range r.Idempotency {
		return name
	}
	return ""
}

// postRaw posts body, as it is, as tenant: a test's way to send bytes a
// JSON encoder would not write.
func (a *app) postRaw(tenant string, body []byte) *testkit.Response {
	a.t.Helper()
	req, err := http.NewRequest(http.MethodPost, a.Endpoint, bytes.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(graph.TenantHeader, tenant)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	r := &testkit.Response{Status: res.StatusCode, Header: res.Header}
	if r.Body, err = io.ReadAll(res.Body); err != nil {
		a.t.Fatal(err)
	}
	if err := json.Unmarshal(r.Body, r); err != nil {
		a.t.Fatalf("decode %q: %v", r.Body, err)
	}
	return r
}

// The X-Tenant-ID header sent twice is refused, whichever the operation,
// before anything runs (UNAUTHENTICATED, HTTP 401), as a doubled
// Idempotency-Key is: the first tenant used to win silently.
func TestDoubledTenantHeaderIsRefused(t *testing.T) {
	a := newApp(t, idemtest.SQLite)
	order := a.newOrder("acme", 100)
	twice := http.Header{graph.TenantHeader: {"acme", "globex"}}
	for _, op := range []struct {
		query string
		vars  map[string]any
	}{
		{createOrder, map[string]any{"key": "twice", "amount": 100, "currency": "EUR"}},
		{`query($id: ID!) { order(id: $id) { id } }`, map[string]any{"id": order}},
	} {
		r, err := a.Send("", op.query, op.vars, twice)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != http.StatusUnauthorized || r.Code() != string(idemcode.Unauthenticated) ||
			!strings.Contains(r.Errors[0].Message, graph.TenantHeader+" header was sent 2 times") || r.Data != nil && string(r.Data) != "null" {
			t.Errorf("%s: HTTP %d %s", op.query, r.Status, r.Body)
		}
	}
	if n := a.allOrders(); n != 1 {
		t.Fatalf("%d orders, want the first only", n)
	}
}

// An attempt that failed with a retryable error (the provider failed) is
// released: its client is told, in the error, to retry with the same key
// and never a new one, and, with the recoverer on, that the server
// finishes the intent itself if the client does not come back (a client
// that starts over with a new key would pay twice). The error carries the
// key.
func TestReleasedAttemptSaysRetryWithTheSameKey(t *testing.T) {
	for _, recoverer := range []bool{false, true} {
		t.Run(fmt.Sprintf("recoverer=%v", recoverer), func(t *testing.T) {
			a := newApp(t, idemtest.SQLite, func(o *graph.Options) {
				if recoverer {
					// On, but far from recovering this claim while the
					// test runs.
					o.RecoverAfter = time.Hour
				} else {
					o.RecoverAfter = idem.RecoverNever
				}
			})
			order := a.newOrder("acme", 100)
			a.Provider.FailureRate = 1
			r := a.pay("acme", "released", order, 100)
			if r.Code() != string(idemcode.InternalServerError) || r.Outcome("createPayment") != idemcode.OutcomeReleased {
				t.Fatalf("provider failure: %s", r.Body)
			}
			msg := r.Errors[0].Message
			if !strings.Contains(msg, "retry with the same idempotency key, never a new one") || r.Errors[0].Extensions["idempotencyKey"] != "released" {
				t.Errorf("the error does not say to retry with the same key: %s", r.Body)
			}
			if says := strings.Contains(msg, "the server finishes this intent itself"); says != recoverer {
				t.Errorf("says the server finishes the intent: %v, want %v: %s", says, recoverer, msg)
			}
			a.Provider.FailureRate = 0
			if r := a.pay("acme", "released", order, 100); len(r.Errors) > 0 || len(a.charges("acme", order)) != 1 {
				t.Fatalf("retry: %s", r.Body)
			}
		})
	}
}
