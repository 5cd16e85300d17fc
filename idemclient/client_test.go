package idemclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	mathrand "math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemclient"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/example/provider"
	"github.com/goovo/idem/internal/testkit/exampletest"
)

// The acceptance test of the client: against the example server whose
// payment provider is slow and flaky, and with attempts that time out
// before the provider answers, every intent completes exactly once.
const (
	intents = 40
	// Every fourth intent submits its payment twice at once (a double
	// click): both calls must get the same payment.
	doubleSubmitEvery = 4

	// The provider takes providerLatency plus up to providerJitter before
	// it charges and providerResponseLatency after (a timeout there leaves
	// the money charged and the books rolled back: the retry must get the
	// same charge back from the provider), and fails providerFailureRate of
	// the charges before charging.
	providerLatency         = 20 * time.Millisecond
	providerJitter          = 50 * time.Millisecond
	providerResponseLatency = 10 * time.Millisecond
	providerFailureRate     = 0.3

	// The first attempt of a mutation times out after attemptTimeout, which
	// is shorter than many provider calls; later attempts get twice as long
	// each, up to maxAttemptTimeout, which leaves a busy machine time to
	// answer.
	attemptTimeout    = 60 * time.Millisecond
	maxAttemptTimeout = 10 * time.Second

	// budget bounds the whole test on one backend: the intents take
	// seconds, but a claim that a busy server could not release stays in
	// progress until its lease (30 s) runs out, and the clients must see
	// it through.
	budget = 2 * time.Minute

	// serverLease is the server's lease: the default (30 s), far longer
	// than this test. A client that gives up releases the key at once (the
	// server runs its claim and take-over statements to their end however
	// the client leaves), so no intent waits for a lease to run out.
	serverLease = 0
)

const createOrderMutation = `mutation($key: String!, $amount: Int!, $currency: String!) {
  createOrder(idempotencyKey: $key, input: {amount: $amount, currency: $currency}) { id amount paid }
}`

const createPaymentMutation = `mutation($key: String!, $order: ID!, $amount: Int!) {
  createPayment(idempotencyKey: $key, input: {orderID: $order, amount: $amount}) {
    id amount providerChargeID order { id paid }
  }
}`

const checkQuery = `query($id: ID!) {
  order(id: $id) { id paid payments { id } }
  providerCharges(orderID: $id) { id idempotencyKey requests }
}`

func TestSlowFlakyProviderEveryIntentOnce(t *testing.T) {
	for _, backend := range idemtest.RiverKinds() {
		t.Run(backend.String(), func(t *testing.T) { testEveryIntentOnce(t, backend) })
	}
}

// intentResult is what one intent's client calls returned.
type intentResult struct {
	orderKey, payKey    string
	orderID, paymentID  string
	chargeID            string
	orderAttempts       int
	paymentAttempts     []int // one per submission
	paymentReplays      int
	err                 error
	doubleSubmitted     bool
	submissionsAgreeing bool
}

func testEveryIntentOnce(t *testing.T, backend idemtest.Kind) {
	start := time.Now()
	app := startSlowFlakyServer(t, backend)
	stats := &retryStats{reasons: map[idemclient.Reason]int{}}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 2 * intents
	t.Cleanup(transport.CloseIdleConnections)
	c := &idemclient.Client{
		URL:    app.URL + "/query",
		HTTP:   &http.Client{Transport: transport},
		Header: http.Header{graph.TenantHeader: {"acme"}},
		// On SQLite every attempt's transaction, provider call included,
		// waits for the one write lock, so a claim can stay pending for
		// seconds while 40 intents take turns: a call needs up to about
		// 20 attempts, more under the race detector or on a busy machine,
		// hundreds while a claim waits for its lease to run out. The
		// budget is the context's, not a count.
		MaxAttempts:       math.MaxInt32,
		BaseBackoff:       10 * time.Millisecond,
		MaxBackoff:        250 * time.Millisecond,
		AttemptTimeout:    attemptTimeout,
		MaxAttemptTimeout: maxAttemptTimeout,
		OnRetry:           stats.record,
	}

	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	results := make([]*intentResult, intents)
	var wg sync.WaitGroup
	for i := range intents {
		wg.Go(func() { results[i] = runIntent(ctx, c, i) })
	}
	wg.Wait()
	elapsed := time.Since(start)

	// Every intent completed, with one order and one payment.
	for i, r := range results {
		if r.err != nil {
			t.Errorf("intent %d: %v", i, r.err)
			continue
		}
		if r.doubleSubmitted && !r.submissionsAgreeing {
			t.Errorf("intent %d: the two submissions of one payment got different answers", i)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The server's books and the provider's ledger agree: one payment and
	// one charge per order, with the intent's key.
	dedupedByProvider := 0
	for i, r := range results {
		var got struct {
			Order struct {
				ID       string
				Paid     bool
				Payments []struct{ ID string }
			}
			ProviderCharges []struct {
				ID             string
				IdempotencyKey string
				Requests       int
			}
		}
		query(t, app.URL, checkQuery, map[string]any{"id": r.orderID}, &got)
		if !got.Order.Paid {
			t.Errorf("intent %d: order %s is not paid", i, r.orderID)
		}
		if len(got.Order.Payments) != 1 || got.Order.Payments[0].ID != r.paymentID {
			t.Errorf("intent %d: order %s has payments %+v, want exactly [%s]", i, r.orderID, got.Order.Payments, r.paymentID)
		}
		if len(got.ProviderCharges) != 1 {
			t.Errorf("intent %d: the provider charged order %s %d times: %+v", i, r.orderID, len(got.ProviderCharges), got.ProviderCharges)
			continue
		}
		ch := got.ProviderCharges[0]
		if ch.ID != r.chargeID || ch.IdempotencyKey != r.payKey {
			t.Errorf("intent %d: charge %+v, want id %s with key %s", i, ch, r.chargeID, r.payKey)
		}
		if ch.Requests > 1 {
			dedupedByProvider++
		}
	}
	all := idemschema.IncludeUnfinished(context.Background())
	if n := app.Client.Payment.Query().CountX(all); n != intents {
		t.Errorf("%d payment rows, want %d", n, intents)
	}
	if n := app.Client.Order.Query().CountX(all); n != intents {
		t.Errorf("%d order rows, want %d", n, intents)
	}

	// Retries happened, of the kinds this test is about; otherwise it
	// proves nothing.
	stats.mu.Lock()
	defer stats.mu.Unlock()
	var attempts []int
	replays := 0
	for _, r := range results {
		attempts = append(attempts, r.orderAttempts)
		attempts = append(attempts, r.paymentAttempts...)
		replays += r.paymentReplays
	}
	t.Logf("%s: %d intents in %v; %d calls, %d attempts, %d retries %v; max attempts of one call %d; "+
		"%d payment answers were replays; the provider deduplicated a retried charge for %d orders",
		backend, intents, elapsed.Round(time.Millisecond), len(attempts), sum(attempts), stats.total, stats.summary(),
		slices.Max(attempts), replays, dedupedByProvider)
	if stats.total == 0 {
		t.Fatalf("no retries: the test exercised nothing")
	}
	for _, want := range []idemclient.Reason{idemclient.ReasonTimeout, idemclient.ReasonReleased} {
		if stats.reasons[want] == 0 {
			t.Errorf("no %s retries: the test did not exercise them", want)
		}
	}
}

// runIntent creates an order and pays it, each with a key of its own,
// through the client.
func runIntent(ctx context.Context, c *idemclient.Client, i int) *intentResult {
	r := &intentResult{orderKey: idemclient.NewKey(), payKey: idemclient.NewKey()}
	amount := 1000 + i
	res, err := c.Do(ctx, idemclient.Request{
		Query:     createOrderMutation,
		Variables: map[string]any{"amount": amount, "currency": "EUR"},
		Key:       r.orderKey,
	})
	if err != nil {
		r.err = fmt.Errorf("createOrder: %w", err)
		return r
	}
	r.orderAttempts = res.Attempts
	var order struct{ CreateOrder struct{ ID string } }
	if err := res.Decode(&order); err != nil || order.CreateOrder.ID == "" {
		r.err = fmt.Errorf("createOrder: %s (%v)", res.Body, err)
		return r
	}
	r.orderID = order.CreateOrder.ID

	pay := idemclient.Request{
		Query:     createPaymentMutation,
		Variables: map[string]any{"order": r.orderID, "amount": amount},
		Key:       r.payKey,
	}
	submissions := 1
	if i%doubleSubmitEvery == 0 {
		submissions, r.doubleSubmitted = 2, true
	}
	type payment struct {
		ID, ChargeID string
		attempts     int
		replayed     bool
		err          error
	}
	payments := make([]payment, submissions)
	var wg sync.WaitGroup
	for s := range submissions {
		wg.Go(func() {
			res, err := c.Do(ctx, pay)
			if err != nil {
				payments[s].err = err
				return
			}
			var out struct {
				CreatePayment struct {
					ID               string
					ProviderChargeID string
					Order            struct{ Paid bool }
				}
			}
			if err := res.Decode(&out); err != nil || out.CreatePayment.ID == "" || out.CreatePayment.ProviderChargeID == "" || !out.CreatePayment.Order.Paid {
				payments[s].err = fmt.Errorf("unexpected answer %s (%v)", res.Body, err)
				return
			}
			payments[s] = payment{ID: out.CreatePayment.ID, ChargeID: out.CreatePayment.ProviderChargeID, attempts: res.Attempts, replayed: res.Replayed}
		})
	}
	wg.Wait()
	for _, p := range payments {
		if p.err != nil {
			r.err = fmt.Errorf("createPayment: %w", p.err)
			return r
		}
		r.paymentAttempts = append(r.paymentAttempts, p.attempts)
		if p.replayed {
			r.paymentReplays++
		}
	}
	r.paymentID, r.chargeID = payments[0].ID, payments[0].ChargeID
	r.submissionsAgreeing = true
	for _, p := range payments[1:] {
		r.submissionsAgreeing = r.submissionsAgreeing && p.ID == r.paymentID && p.ChargeID == r.chargeID
	}
	return r
}

// startSlowFlakyServer runs the example application in-process on a fresh
// database of backend (internal/testkit/exampletest, as graph's suite does), with a
// slow and flaky payment provider.
func startSlowFlakyServer(t *testing.T, backend idemtest.Kind) *exampletest.App {
	t.Helper()
	var logw io.Writer = io.Discard
	if os.Getenv("IDEMCLIENT_DEBUG") != "" { // the server's log, to diagnose a failure
		logw = os.Stderr
	}
	return exampletest.Start(t, backend, exampletest.Config{
		Options: graph.Options{Lease: serverLease, Logger: slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		Provider: func(sim *provider.Simulated) provider.Provider {
			sim.Latency = providerLatency
			sim.ResponseLatency = providerResponseLatency
			sim.FailureRate = providerFailureRate
			return &jitteryProvider{Simulated: sim, jitter: providerJitter}
		},
	})
}

// jitteryProvider adds a random latency of up to jitter to the simulated
// provider's charges, so that attempt timeouts hit some calls and not
// others.
type jitteryProvider struct {
	*provider.Simulated
	jitter time.Duration
}

func (p *jitteryProvider) Charge(ctx context.Context, req provider.ChargeRequest) (*provider.Charge, error) {
	t := time.NewTimer(time.Duration(mathrand.Int64N(int64(p.jitter) + 1)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	return p.Simulated.Charge(ctx, req)
}

// retryStats counts the client's retries.
type retryStats struct {
	mu      sync.Mutex
	total   int
	reasons map[idemclient.Reason]int
}

func (s *retryStats) record(r idemclient.Retry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total++
	s.reasons[r.Reason]++
}

// summary lists the counts by reason; the caller holds mu.
func (s *retryStats) summary() string {
	var parts []string
	for _, r := range []idemclient.Reason{idemclient.ReasonTimeout, idemclient.ReasonReleased, idemclient.ReasonInProgress,
		idemclient.ReasonUnavailable, idemclient.ReasonNetwork, idemclient.ReasonStatus} {
		if n := s.reasons[r]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", r, n))
		}
	}
	return "(" + strings.Join(parts, " ") + ")"
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// query sends a read-only GraphQL query once, as tenant acme, and decodes
// its data into out.
func query(t *testing.T, url, q string, vars map[string]any, out any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": q, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, url+"/query", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(graph.TenantHeader, "acme")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var doc struct {
		Data   json.RawMessage
		Errors []idemclient.Error
	}
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc.Errors) > 0 {
		t.Fatalf("query: %s (%v)", raw, err)
	}
	if err := json.Unmarshal(doc.Data, out); err != nil {
		t.Fatalf("query: %s: %v", raw, err)
	}
}
