package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/ent/payment"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemhttp"
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
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
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
		if r := a.do("acme", pay, vars); idemtest.Outcome(t, r.Body, "paid") != idemcode.OutcomeReleased {
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

// recovering starts the app with the recoverer on, logging into logs.
func recovering(after time.Duration, logs *syncBuffer) appOption {
	return func(o *graph.Options) {
		o.RecoverAfter = after
		o.Retention = time.Hour
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
}

// abandonPayment sends a payment whose client hangs up once the provider
// has charged, before the answer, and never comes back; the provider's
// answer is lost, so the attempt is released (see abandoning).
func (a *app) abandonPayment(key, order string, amount int) {
	a.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": createPayment, "variables": map[string]any{"key": key, "order": order, "amount": amount}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := make(chan struct{})
	a.provider.abandon(key, func() {
		cancel()
		<-gone
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+"/query", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(graph.TenantHeader, "acme")
	res, err := http.DefaultClient.Do(req)
	close(gone)
	if err == nil {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		a.t.Fatalf("the payment answered before its client gave up: %s", b)
	}
	if len(a.charges("acme", order)) == 0 {
		a.t.Fatalf("the abandoned payment did not charge: %v", err)
	}
}

// awaitFinished waits until the record of key is finished, and returns its
// state.
func (a *app) awaitFinished(key string) string {
	a.t.Helper()
	hook, err := idem.New(idem.Config{Backend: a.Client.IdempotencyBackend(), Clock: a.clock})
	if err != nil {
		a.t.Fatal(err)
	}
	admin := idemctl.New(hook)
	var state string
	testkit.Eventually(a.t, func() bool {
		recs, err := admin.Inspect(context.Background(), "acme", key)
		if err != nil {
			a.t.Fatal(err)
		}
		for _, r := range recs {
			if r.State == idemtest.Succeeded || r.State == idemtest.Failed {
				state = r.State
				return true
			}
		}
		return false
	}, "key %s finished", key)
	return state
}

// recoveredKeys lists, by idemctl recovered, what the recoverer finished:
// key → status, with the error code of a failed one.
func (a *app) recoveredKeys() map[string]string {
	a.t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := idemctl.Command{Config: idem.Config{Backend: a.Client.IdempotencyBackend(), Clock: a.clock}}
	if code := cmd.Run(context.Background(), []string{"-json", "recovered", "-table", "Payment"}, &stdout, &stderr); code != idemctl.ExitOK {
		a.t.Fatalf("idemctl recovered: exit %d: %s", code, stderr.String())
	}
	var out struct {
		Complete bool                 `json:"complete"`
		Records  []idemctl.RecordInfo `json:"records"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || !out.Complete {
		a.t.Fatalf("idemctl recovered: %s (%v)", stdout.String(), err)
	}
	keys := map[string]string{}
	for _, r := range out.Records {
		if r.Tenant != "acme" || !r.Recovered {
			a.t.Fatalf("idemctl recovered lists %+v", r)
		}
		keys[r.Key] = r.Status
		if len(r.Errors) > 0 {
			keys[r.Key] += " " + fmt.Sprint(r.Errors[0].Extensions["code"])
		}
	}
	return keys
}

// Nobody retries: the recoverers of two server processes on one database
// race for each abandoned payment, one of them runs it again with its key
// (the provider finds the charge it made), and the order is paid once with
// one live charge. The client's late retry replays that success.
func TestRecovererFinishesAnAbandonedPayment(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		logs, otherLogs := &syncBuffer{}, &syncBuffer{}
		a := newApp(t, b, recovering(300*time.Millisecond, logs))
		// A second server process, recovering too.
		a.Handler(a.Client, graph.Options{Clock: a.clock, RecoverAfter: 300 * time.Millisecond, Retention: time.Hour,
			Logger: slog.New(slog.NewTextHandler(otherLogs, nil))})

		const n = 3
		orders := make([]string, n)
		for i := range n {
			orders[i] = a.newOrder("acme", 500+i)
			a.abandonPayment(fmt.Sprintf("nobody-retries-%d", i), orders[i], 500+i)
		}
		for i, order := range orders {
			key := fmt.Sprintf("nobody-retries-%d", i)
			if state := a.awaitFinished(key); state != idemtest.Succeeded {
				t.Fatalf("%s: %s, want succeeded", key, state)
			}
			cs := a.charges("acme", order)
			// Requested by the attempt and the recovery (and again by any
			// run that failed and released the claim): one charge.
			if len(cs) != 1 {
				t.Fatalf("%s: %d charges, want 1", key, len(cs))
			}
			if c := *cs[0]; c.Voided || c.Requests < 2 {
				t.Fatalf("%s: charge %+v, want it live, requested by the attempt and the recovery", key, c)
			}
			r := a.pay("acme", key, order, 500+i)
			idemtest.RequireReplayed(t, r.Body, "createPayment")
			if !strings.Contains(string(r.Data), `"paid":true`) || strings.Contains(string(r.Body), "ecovered") {
				t.Fatalf("%s: late retry: %s", key, r.Body)
			}
		}
		// A payment its client finished is not listed.
		if r := a.pay("acme", "client-finished", a.newOrder("acme", 100), 100); len(r.Errors) > 0 {
			t.Fatalf("payment: %s", r.Body)
		}
		want := map[string]string{}
		for i := range n {
			want[fmt.Sprintf("nobody-retries-%d", i)] = idemtest.Succeeded
		}
		if got := a.recoveredKeys(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("idemctl recovered: %v, want %v", got, want)
		}
		if got := strings.Count(logs.String()+otherLogs.String(), "idempotency claim recovered"); got != n {
			t.Fatalf("%d recoveries logged, want %d:\n%s\n%s", got, n, logs, otherLogs)
		}
		if strings.Contains(logs.String()+otherLogs.String(), "nobody-retries") {
			t.Fatal("a key is logged in clear")
		}
	})
}

// The user paid again with a second key meanwhile: the recoverer's run of
// the first finds the order paid, voids the first key's charge and stores
// ORDER_ALREADY_PAID, without the first client ever coming back.
func TestRecovererCompensatesWhenPaidWithAnotherKey(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		logs := &syncBuffer{}
		// Far longer than the second payment takes, even on a busy
		// machine; the test then moves the database clock past it
		// (the recoverer looks every 5 s).
		const after = 20 * time.Second
		a := newApp(t, b, recovering(after, logs))
		order := a.newOrder("acme", 900)
		a.abandonPayment("k1", order, 900)
		if r := a.pay("acme", "k2", order, 900); len(r.Errors) > 0 {
			t.Fatalf("payment with a second key: %s", r.Body)
		}
		a.clock.Advance(after + 5*time.Second)
		if state := a.awaitFinished("k1"); state != idemtest.Failed {
			t.Fatalf("k1: %s, want failed", state)
		}
		cs := a.charges("acme", order)
		voided := map[string]bool{}
		for _, c := range cs {
			voided[c.IdempotencyKey] = c.Voided
		}
		if len(cs) != 2 || !voided["k1"] || voided["k2"] {
			t.Fatalf("charges %+v: want k1's voided and k2's live", cs)
		}
		if r := a.pay("acme", "k1", order, 900); r.Code() != "ORDER_ALREADY_PAID" {
			t.Fatalf("k1's late retry: %s", r.Body)
		}
		if !strings.Contains(logs.String(), "idempotency claim recovered") || !strings.Contains(logs.String(), "code=ORDER_ALREADY_PAID") {
			t.Fatalf("no recovery logged:\n%s", logs)
		}
		// k2, which its client finished, is not listed.
		if got := a.recoveredKeys(); len(got) != 1 || got["k1"] != "failed ORDER_ALREADY_PAID" {
			t.Fatalf("idemctl recovered: %v, want k1 failed with ORDER_ALREADY_PAID", got)
		}
		var text, stderr bytes.Buffer
		idemctl.Command{Config: idem.Config{Backend: a.Client.IdempotencyBackend()}}.Run(context.Background(), []string{"recovered"}, &text, &stderr)
		if !regexp.MustCompile(`(?m)^1 record finished by the recoverer .*\n\n.*\nPayment +acme +"k1" +\S*createPayment +failed ORDER_ALREADY_PAID +\S+`).Match(text.Bytes()) {
			t.Fatalf("idemctl recovered:\n%s%s", text.String(), stderr.String())
		}
	})
}

// A claim whose runs keep failing is tried again, less and less often,
// and stored as failed with IDEMPOTENCY_ABANDONED once a retention window
// has passed since it was made; the client's retry gets that.
func TestRecovererAbandonsWhatCannotFinish(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		logs := &syncBuffer{}
		a := newApp(t, b, recovering(100*time.Millisecond, logs), func(o *graph.Options) {
			o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})) // the runs that fail
		})
		a.Provider.FailureRate = 1 // every charge fails, retryably
		order := a.newOrder("acme", 300)
		if r := a.pay("acme", "doomed", order, 300); r.Code() != string(idemcode.InternalServerError) {
			t.Fatalf("payment: %s", r.Body)
		}
		testkit.Eventually(t, func() bool { return strings.Contains(logs.String(), "idempotency claim not recovered yet") },
			"the recoverer tried the claim, and failed")
		idemtest.RequireState(t, a.Client.IdempotencyBackend(), "acme", "doomed", idemtest.Pending)
		a.clock.Advance(2 * time.Hour) // past the retention window
		if state := a.awaitFinished("doomed"); state != idemtest.Failed {
			t.Fatalf("doomed: %s, want failed", state)
		}
		if r := a.pay("acme", "doomed", order, 300); r.Code() != string(idemcode.Abandoned) {
			t.Fatalf("retry: %s", r.Body)
		}
		// Logged once the abandonment committed, which the retry may see
		// first on a busy machine.
		testkit.Eventually(t, func() bool { return strings.Contains(logs.String(), "idempotency claim abandoned") },
			"the abandonment logged")
		// Abandoned is not finished: idemctl failed lists it, not recovered.
		if got := a.recoveredKeys(); len(got) != 0 {
			t.Fatalf("idemctl recovered: %v, want nothing", got)
		}
	})
}

// A key sent in the Idempotency-Key header beside an idempotencyKey
// argument left null (a literal null, or a variable sent as null) is
// written into the claim's stored operation: the recoverer's run of it
// has its key, and finishes the payment.
func TestHeaderKeyIsWrittenIntoTheStoredOperation(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b, recovering(300*time.Millisecond, &syncBuffer{}))
		for i, query := range []string{
			`mutation($order: ID!) { createPayment(idempotencyKey: null, input: {orderID: $order, amount: 700}) { id providerChargeID } }`,
			`mutation($key: String, $order: ID!) { createPayment(idempotencyKey: $key, input: {orderID: $order, amount: 700}) { id providerChargeID } }`,
		} {
			key := fmt.Sprintf("header-null-%d", i)
			vars := map[string]any{"order": a.newOrder("acme", 700), "key": nil}
			if i == 0 {
				delete(vars, "key")
			}
			header := http.Header{idemcode.HeaderKey: {idemhttp.FormatKeyHeader(key)}}
			a.Provider.FailureRate = 1 // the claim is released, pending
			r, err := a.Send("acme", query, vars, header)
			if err != nil || idemtest.Outcome(t, r.Body, "createPayment") != idemcode.OutcomeReleased {
				t.Fatalf("%s: %v %s", key, err, r.Body)
			}
			stored, storedVars := a.storedOperation("acme", key)
			if !strings.Contains(stored, `idempotencyKey: "`+key+`"`) || strings.Contains(stored, "$key") || storedVars["key"] != nil {
				t.Fatalf("%s: stored operation %s %v, want the header's key as the argument", key, stored, storedVars)
			}
			a.Provider.FailureRate = 0
			if state := a.awaitFinished(key); state != idemtest.Succeeded {
				t.Fatalf("%s: %s, want succeeded", key, state)
			}
			if r, err = a.Send("acme", query, vars, header); err != nil || !strings.Contains(string(r.Data), `"providerChargeID":"ch_`) {
				t.Fatalf("%s: late retry: %v %s", key, err, r.Body)
			}
			idemtest.RequireReplayed(t, r.Body, "createPayment")
		}
	})
}

// The recoverer acts as the payment's user, not only its tenant: a
// payment whose client never came back is charged, by the recoverer, as
// the user (X-User-ID) who made it, as a client's own payment is.
func TestRecovererRunsAsTheCaller(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b, recovering(300*time.Millisecond, &syncBuffer{}))
		send := func(user, key, order string) *testkit.Response {
			t.Helper()
			r, err := a.Send("acme", createPayment, map[string]any{"key": key, "order": order, "amount": 900},
				http.Header{graph.UserHeader: {user}})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		requestedBy := func(order string) string {
			t.Helper()
			cs := a.charges("acme", order)
			if len(cs) != 1 {
				t.Fatalf("order %s: %d charges, want 1", order, len(cs))
			}
			return cs[0].RequestedBy
		}
		byClient := a.newOrder("acme", 900)
		if r := send("bob", "bob-pays", byClient); len(r.Errors) > 0 {
			t.Fatalf("bob's payment: %s", r.Body)
		}
		if got := requestedBy(byClient); got != "bob" {
			t.Fatalf("bob's charge requested by %q", got)
		}

		byRecoverer := a.newOrder("acme", 900)
		a.Provider.FailureRate = 1 // the claim is released, pending
		if r := send("alice", "alice-pays", byRecoverer); idemtest.Outcome(t, r.Body, "createPayment") != idemcode.OutcomeReleased {
			t.Fatalf("alice's payment with a failing provider: %s", r.Body)
		}
		a.Provider.FailureRate = 0
		if state := a.awaitFinished("alice-pays"); state != idemtest.Succeeded {
			t.Fatalf("alice-pays: %s, want succeeded", state)
		}
		if got := requestedBy(byRecoverer); got != "alice" {
			t.Fatalf("the recovered charge was requested by %q, want alice", got)
		}
		if got := a.recoveredKeys(); got["alice-pays"] != idemtest.Succeeded {
			t.Fatalf("idemctl recovered: %v", got)
		}
	})
}

// One tenant's 100 abandoned payments that cannot be run (their operation
// was too large to keep) do not hold up another tenant's abandoned
// payment: the recoverer finishes it a round after RecoverAfter.
func TestRecovererIsFairToOtherTenants(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		const after = 300 * time.Millisecond
		a := newApp(t, b, recovering(after, &syncBuffer{}))
		order := a.newOrder("mallory", 100)
		// Ten aliases of 7,000 characters: an operation over the 64 KiB a
		// claim keeps.
		var big strings.Builder
		big.WriteString(`mutation($key: String!, $order: ID!) { createPayment(idempotencyKey: $key, input: {orderID: $order, amount: 100}) {`)
		for i := range 10 {
			fmt.Fprintf(&big, " a%d%s: id", i, strings.Repeat("x", 7000))
		}
		big.WriteString(" } }")
		a.Provider.FailureRate = 1 // each claim is released, pending
		for i := range 100 {
			key := fmt.Sprintf("unrunnable-%03d", i)
			if r := a.do("mallory", big.String(), map[string]any{"key": key, "order": order}); idemtest.Outcome(t, r.Body, "createPayment") != idemcode.OutcomeReleased {
				t.Fatalf("%s: %.300s", key, r.Body)
			}
		}
		p, err := a.Client.Payment.Query().Where(payment.TenantID("mallory"), payment.IdempotencyKey("unrunnable-000")).
			Only(idemschema.IncludeUnfinished(context.Background()))
		if err != nil || (p.IdempotencyOperation != nil && len(*p.IdempotencyOperation) > 0) {
			t.Fatalf("unrunnable-000: %v, want a claim without an operation", err)
		}
		a.Provider.FailureRate = 0
		a.Provider.ResponseLatency = time.Second // the server sees its client gone long before
		abandoned := time.Now()
		a.abandonPayment("acme-pays", a.newOrder("acme", 500), 500)
		if state := a.awaitFinished("acme-pays"); state != idemtest.Succeeded {
			t.Fatalf("acme-pays: %s, want succeeded", state)
		}
		t.Logf("acme's payment finished %v after it was abandoned (RecoverAfter %v)", time.Since(abandoned).Round(time.Millisecond), after)
		idemtest.RequireState(t, a.Client.IdempotencyBackend(), "mallory", "unrunnable-099", idemtest.Pending)
	})
}
