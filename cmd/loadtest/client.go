package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/testkit/hostile"
)

// verdict is what one HTTP attempt tells the client about its intent:
// either a final answer, or why to retry later with the same key.
type verdict struct {
	final bool
	// kind of a final answer: "executed", "replayed", or the code of a
	// final error (such as ORDER_ALREADY_PAID).
	kind string
	// data is the response's data member, byte for byte.
	data json.RawMessage
	// retry names why a non-final attempt must be retried: network,
	// timeout, http5xx, bad-response, released, or an error code.
	retry string
	// retryAfter is the server's hint (extensions.retryAfterSeconds).
	retryAfter time.Duration
}

type gqlResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
	Extensions struct {
		Idempotency map[string]struct {
			Outcome string `json:"outcome"`
		} `json:"idempotency"`
	} `json:"extensions"`
}

// classify reads the answer to a request whose idempotent field is field.
// Everything that says "nothing was decided for this key" is a retry:
// IDEMPOTENCY_IN_PROGRESS, IDEMPOTENCY_UNAVAILABLE, HTTP 5xx, an
// unreadable body (a server killed while writing it), and the outcome
// "released" (the mutation failed with a retryable error and was rolled
// back). Anything else is the intent's final answer.
func classify(field string, status int, body []byte) verdict {
	if status >= 500 {
		return verdict{retry: "http5xx"}
	}
	var r gqlResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return verdict{retry: "bad-response"}
	}
	code, retryAfter := "", time.Duration(0)
	if len(r.Errors) > 0 {
		code, _ = r.Errors[0].Extensions["code"].(string)
		if s, ok := r.Errors[0].Extensions["retryAfterSeconds"].(float64); ok {
			retryAfter = time.Duration(s * float64(time.Second))
		}
	}
	outcome := r.Extensions.Idempotency[field].Outcome
	switch {
	case outcome == idemcode.OutcomeReleased:
		return verdict{retry: idemcode.OutcomeReleased}
	case code == string(idemcode.InProgress) || code == string(idemcode.Unavailable):
		return verdict{retry: code, retryAfter: retryAfter}
	case status != http.StatusOK:
		return verdict{final: true, kind: fmt.Sprintf("HTTP_%d", status), data: r.Data}
	case len(r.Errors) > 0:
		if code == "" {
			code = "ERROR_WITHOUT_CODE"
		}
		return verdict{final: true, kind: code, data: r.Data}
	case outcome == "":
		return verdict{final: true, kind: "UNMARKED", data: r.Data}
	}
	return verdict{final: true, kind: outcome, data: r.Data}
}

// client is the tool's one way of sending requests to the fleet's servers:
// the retried attempts of the load's, the burst's, the audit's and the
// bench's intents (attempt, perform), the anchor's creates, and the
// adversary's and the soak's single requests (query, hostile, rawBody).
type client struct {
	http  *http.Client
	fleet *fleet
	stats *stats // of the retried attempts; nil for single requests
	cfg   clientConfig
	// tenantHeader carries the tenant: X-Tenant-ID for the example
	// server, X-Org for the test application's (the anchor).
	tenantHeader string
	// slots bounds the attempts in flight: each holds up to two database
	// connections on its server, and PostgreSQL's max_connections is
	// shared with whoever else uses the database. nil: no bound.
	slots chan struct{}
}

// clientConfig is how a client retries: the faults' flags, or fixed values
// for the burst and the bench.
type clientConfig struct {
	maxInFlight int           // attempts in flight at most (0: no bound)
	timeout     time.Duration // of an attempt, after which it is abandoned and retried
	abandonRate float64       // fraction of attempts abandoned early
	abandonMax  time.Duration // their longest timeout
	maxBackoff  time.Duration // longest wait between two attempts
}

// newClient returns the client of retried attempts, with connections kept
// for every client goroutine.
func newClient(cc clientConfig, f *fleet, st *stats) *client {
	tr := &http.Transport{
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	c := &client{http: &http.Client{Transport: tr}, fleet: f, stats: st, cfg: cc, tenantHeader: "X-Tenant-ID"}
	if cc.maxInFlight > 0 {
		c.slots = make(chan struct{}, cc.maxInFlight)
	}
	return c
}

// newRequest is a JSON POST of body to server i's GraphQL endpoint, as
// tenant. A body without a length (not a *bytes.Reader) is sent chunked.
func (c *client) newRequest(ctx context.Context, i int, tenant string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.fleet.url(i), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(c.tenantHeader, tenant)
	return req, nil
}

// roundTrip sends req and reads the whole answer.
func (c *client) roundTrip(req *http.Request) (int, []byte, error) {
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// attempt sends body once to server i, abandoning it after timeout. A
// retry (retry > 0, its number) says so, as idemclient's do: the server
// then looks the key up before claiming it.
func (c *client) attempt(ctx context.Context, i int, field, tenant string, body []byte, timeout time.Duration, retry int) verdict {
	if c.slots != nil {
		select {
		case c.slots <- struct{}{}:
			defer func() { <-c.slots }()
		case <-ctx.Done():
			return verdict{retry: "timeout"}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := c.newRequest(ctx, i, tenant, bytes.NewReader(body))
	if err != nil {
		return verdict{retry: "network"}
	}
	if retry > 0 {
		req.Header.Set(idemcode.HeaderRetry, strconv.Itoa(retry))
	}
	c.stats.requests.Add(1)
	status, b, err := c.roundTrip(req)
	if err == nil {
		return classify(field, status, b)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return verdict{retry: "timeout"}
	}
	return verdict{retry: "network"}
}

// timeout returns the client timeout of the next attempt: usually
// cfg.timeout, sometimes (abandonRate) a short one that abandons the
// request while the server works on it, which cancels the server's context
// mid-mutation.
func (c *client) timeout() time.Duration {
	if c.cfg.abandonRate > 0 && rand.Float64() < c.cfg.abandonRate {
		return time.Millisecond + rand.N(c.cfg.abandonMax)
	}
	return c.cfg.timeout
}

// backoff is the wait before retry n (1, 2, …): exponential with full
// jitter, at least the server's retryAfter hint, at most cfg.maxBackoff.
func (c *client) backoff(n int, retryAfter time.Duration) time.Duration {
	ceiling := min(c.cfg.maxBackoff, 20*time.Millisecond<<min(n, 10))
	d := rand.N(ceiling) + time.Millisecond
	if retryAfter > d {
		d = min(retryAfter, c.cfg.maxBackoff)
	}
	return d
}

// perform sends one copy of an intent, starting at server first, and
// retries it (with the same key and the same body, each retry on the next
// server, as a load balancer would) until it gets a final answer or ctx
// ends. It reports whether it got one.
func (c *client) perform(ctx context.Context, in *intent, first int) bool {
	for n := 0; ; n++ {
		if ctx.Err() != nil {
			return false
		}
		server := (first + n) % c.fleet.size()
		v := c.attempt(ctx, server, in.field, in.tenant, in.body, c.timeout(), n)
		if v.final {
			in.record(v, server)
			c.stats.answers.add(v.kind)
			return true
		}
		if ctx.Err() != nil {
			// The run's deadline, not the server, ended this attempt.
			return false
		}
		c.stats.retries.add(v.retry)
		t := time.NewTimer(c.backoff(n+1, v.retryAfter))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// Single requests: the adversary and the soak send each request once and
// judge its answer, never retrying it (a retry would hide what they
// measure). They go to the fleet's first server.

// newSingleClient returns a client of single requests to f's first server,
// each given up after timeout (outcome "client timeout").
func newSingleClient(f *fleet, timeout time.Duration) *client {
	// http.DefaultTransport's connections, as a plain Go client has them.
	return &client{http: &http.Client{Timeout: timeout}, fleet: f, tenantHeader: "X-Tenant-ID"}
}

// reply is what a single request got: "ok" with its data, the first
// error's code ("no code" without one), "HTTP n, not JSON", or what
// transportOutcome says.
type reply struct {
	outcome string
	data    json.RawMessage
}

// query sends one GraphQL document, once, as tenant.
func (c *client) query(ctx context.Context, tenant, query string) reply {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": nil})
	req, err := c.newRequest(ctx, 0, tenant, bytes.NewReader(body))
	if err != nil {
		return reply{outcome: "transport error"}
	}
	status, raw, err := c.roundTrip(req)
	if err != nil {
		return reply{outcome: transportOutcome(ctx, err)} // canceled when the phase ended meanwhile
	}
	var r gqlResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return reply{outcome: fmt.Sprintf("HTTP %d, not JSON", status)}
	}
	if len(r.Errors) > 0 {
		code, _ := r.Errors[0].Extensions["code"].(string)
		if code == "" {
			code = "no code"
		}
		return reply{outcome: code}
	}
	return reply{outcome: "ok", data: r.Data}
}

// hostile sends a hostile request, once, as tenant, and names its answer
// as package hostile does.
func (c *client) hostile(ctx context.Context, tenant string, r hostile.Request) string {
	status, body, err := c.roundTrip(r.NewHTTPRequest(c.fleet.url(0), tenant).WithContext(ctx))
	if err != nil {
		return transportOutcome(ctx, err) // canceled when the phase ended meanwhile
	}
	return hostile.Outcome(status, body)
}

// rawBody sends body as it is, chunked (its length not declared), and
// returns the answer's status: "HTTP n".
func (c *client) rawBody(ctx context.Context, tenant string, body []byte) string {
	req, err := c.newRequest(ctx, 0, tenant, io.MultiReader(bytes.NewReader(body)))
	if err != nil {
		return "transport error"
	}
	status, _, err := c.roundTrip(req)
	if err != nil && status == 0 {
		return transportOutcome(ctx, err)
	}
	return fmt.Sprintf("HTTP %d", status)
}

// transportOutcome names a request that got no answer.
func transportOutcome(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return "canceled"
	}
	if strings.Contains(err.Error(), "Client.Timeout") {
		return "client timeout"
	}
	return "transport error"
}

// createOrder creates an order of amount with a new key and returns its id
// ("" on failure) and the outcome.
func (c *client) createOrder(ctx context.Context, tenant string, amount int) (string, string) {
	a := c.query(ctx, tenant, fmt.Sprintf(`mutation { createOrder(idempotencyKey: %q, input: {amount: %d, currency: "EUR"}) { id } }`, newKey(), amount))
	var d struct {
		CreateOrder struct{ ID string } `json:"createOrder"`
	}
	if a.outcome == "ok" && json.Unmarshal(a.data, &d) == nil {
		return d.CreateOrder.ID, a.outcome
	}
	return "", a.outcome
}

// createPayment pays order with a new key and returns the outcome.
func (c *client) createPayment(ctx context.Context, tenant, order string) string {
	return c.query(ctx, tenant, paymentQuery(newKey(), order)).outcome
}

// paymentQuery is a createPayment of 100 of order with key.
func paymentQuery(key, order string) string {
	return fmt.Sprintf(`mutation { createPayment(idempotencyKey: %q, input: {orderID: %s, amount: 100}) { id } }`, key, order)
}

// newKey is a fresh idempotency key.
func newKey() string { return crand.Text() }
