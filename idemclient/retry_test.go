package idemclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemclient"
	"github.com/goovo/idem/idemcode"
)

const okBody = `{"data":{"createOrder":{"id":"1"}},"extensions":{"idempotency":{"createOrder":{"key":"k","outcome":"executed","replayed":false}}}}`

// gqlErr is a response body with one error of code (and extras in its
// extensions) on the field createOrder, reported with outcome.
func gqlErr(code, outcome, extra string) string {
	ext := fmt.Sprintf(`"code":%q,"idempotencyKey":"k"`, code)
	if extra != "" {
		ext += "," + extra
	}
	report := ""
	if outcome != "" {
		report = fmt.Sprintf(`,"extensions":{"idempotency":{"createOrder":{"key":"k","outcome":%q,"replayed":%v}}}`, outcome, outcome == "replayed")
	}
	return fmt.Sprintf(`{"errors":[{"message":"m","path":["createOrder"],"extensions":{%s}}],"data":null%s}`, ext, report)
}

// reply is one canned answer of a stub server.
type reply struct {
	status int
	header map[string]string
	body   string
	// hangup closes the connection without an answer.
	hangup bool
	// stall delays the answer; the stub gives up when the client does.
	stall time.Duration
}

// stub answers the replies in turn (the last one for ever) and records the
// requests' bodies and headers.
type stub struct {
	*httptest.Server
	mu      sync.Mutex
	replies []reply
	bodies  [][]byte
	headers []http.Header
}

func newStub(t *testing.T, replies ...reply) *stub {
	t.Helper()
	s := &stub{replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.bodies)
		s.bodies = append(s.bodies, body)
		s.headers = append(s.headers, r.Header.Clone())
		rep := s.replies[min(n, len(s.replies)-1)]
		s.mu.Unlock()
		if rep.stall > 0 {
			select {
			case <-time.After(rep.stall):
			case <-r.Context().Done():
				return
			}
		}
		if rep.hangup {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(cmp(rep.status, http.StatusOK))
		io.WriteString(w, rep.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func cmp(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func (s *stub) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

const mutation = `mutation($key: String!) { createOrder(idempotencyKey: $key, input: {amount: 1, currency: "EUR"}) { id } }`

// TestRetryClassification sends a request whose first answer is the case's
// and whose second is a success: a retryable first answer takes two
// attempts, a final one is the result after one.
func TestRetryClassification(t *testing.T) {
	cases := []struct {
		name   string
		first  reply
		retry  idemclient.Reason // "" for final
		code   string            // the final answer's code
		errNil bool              // Do returns no error for the final answer
	}{
		{name: "success", first: reply{body: okBody}, errNil: true},
		{name: "replayed", first: reply{header: map[string]string{"Idempotent-Replayed": "true"},
			body: `{"data":{"createOrder":{"id":"1"}},"extensions":{"idempotency":{"createOrder":{"key":"k","outcome":"replayed","replayed":true}}}}`}, errNil: true},
		{name: "stored business error replayed", first: reply{body: gqlErr("BAD_USER_INPUT", "replayed", "")}, code: "BAD_USER_INPUT"},
		{name: "business error executed", first: reply{body: gqlErr("ORDER_ALREADY_PAID", "executed", "")}, code: "ORDER_ALREADY_PAID"},
		{name: "key reused", first: reply{body: gqlErr(string(idemcode.KeyReused), "refused", "")}, code: string(idemcode.KeyReused)},
		{name: "key invalid", first: reply{body: gqlErr(string(idemcode.KeyInvalid), "refused", "")}, code: string(idemcode.KeyInvalid)},
		{name: "key missing", first: reply{body: gqlErr(string(idemcode.KeyMissing), "refused", "")}, code: string(idemcode.KeyMissing)},
		{name: "key expired", first: reply{body: gqlErr(string(idemcode.KeyExpired), "refused", "")}, code: string(idemcode.KeyExpired)},
		{name: "unauthenticated", first: reply{body: gqlErr(string(idemcode.Unauthenticated), "refused", "")}, code: string(idemcode.Unauthenticated)},
		{name: "validation error 422", first: reply{status: 422, body: `{"errors":[{"message":"Cannot query field","extensions":{"code":"GRAPHQL_VALIDATION_FAILED"}}],"data":null}`}, code: "GRAPHQL_VALIDATION_FAILED"},
		{name: "internal error without report", first: reply{body: `{"errors":[{"message":"boom","path":["order"],"extensions":{"code":"INTERNAL"}}],"data":null}`}, code: "INTERNAL"},
		{name: "HTTP 500", first: reply{status: 500, body: "oops"}},
		{name: "HTTP 400 JSON", first: reply{status: 400, body: `{"errors":[{"message":"bad"}],"data":null}`}},
		{name: "HTTP 200 not JSON", first: reply{body: "<html>maintenance</html>"}},
		{name: "in progress", first: reply{body: gqlErr(string(idemcode.InProgress), "refused", `"retryAfterSeconds":1`)}, retry: idemclient.ReasonInProgress},
		{name: "in progress without hint", first: reply{body: gqlErr(string(idemcode.InProgress), "refused", "")}, retry: idemclient.ReasonInProgress},
		{name: "unavailable", first: reply{body: gqlErr(string(idemcode.Unavailable), "refused", "")}, retry: idemclient.ReasonUnavailable},
		{name: "released", first: reply{body: gqlErr("INTERNAL", "released", "")}, retry: idemclient.ReasonReleased},
		{name: "released without error code", first: reply{body: `{"data":{"createOrder":null},"extensions":{"idempotency":{"createOrder":{"key":"k","outcome":"released","replayed":false}}}}`}, retry: idemclient.ReasonReleased},
		{name: "final code wins over in progress", first: reply{body: `{"errors":[` +
			`{"message":"a","path":["a"],"extensions":{"code":"IDEMPOTENCY_IN_PROGRESS","retryAfterSeconds":1}},` +
			`{"message":"b","path":["b"],"extensions":{"code":"IDEMPOTENCY_KEY_REUSED"}}],"data":null}`}, code: string(idemcode.InProgress) /* the first error's */},
		{name: "HTTP 429", first: reply{status: 429, body: "slow down"}, retry: idemclient.ReasonStatus},
		{name: "HTTP 502", first: reply{status: 502, body: "bad gateway"}, retry: idemclient.ReasonStatus},
		{name: "HTTP 503 Retry-After", first: reply{status: 503, header: map[string]string{"Retry-After": "1"}}, retry: idemclient.ReasonStatus},
		{name: "HTTP 504", first: reply{status: 504}, retry: idemclient.ReasonStatus},
		{name: "connection closed", first: reply{hangup: true}, retry: idemclient.ReasonNetwork},
		{name: "attempt timeout", first: reply{stall: time.Hour, body: okBody}, retry: idemclient.ReasonTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStub(t, tc.first, reply{body: okBody})
			var retries []idemclient.Retry
			c := &idemclient.Client{
				URL:         s.URL,
				MaxAttempts: 3,
				BaseBackoff: time.Millisecond,
				MaxBackoff:  5 * time.Millisecond,
				// Far longer than a busy machine takes to answer at once;
				// the timeout case's stall is longer still.
				AttemptTimeout: time.Second,
				OnRetry:        func(r idemclient.Retry) { retries = append(retries, r) },
			}
			res, err := c.Do(context.Background(), idemclient.Request{Query: mutation, Key: "k"})
			if tc.retry != "" {
				if err != nil {
					t.Fatalf("Do: %v", err)
				}
				if len(retries) != 1 || retries[0].Reason != tc.retry || retries[0].Attempt != 1 {
					t.Fatalf("retries = %+v, want one of reason %s", retries, tc.retry)
				}
				if res.Attempts != 2 || s.requests() != 2 {
					t.Fatalf("attempts = %d, requests = %d, want 2", res.Attempts, s.requests())
				}
				if !bytes.Equal(s.bodies[0], s.bodies[1]) {
					t.Fatalf("the retry's body differs:\n%s\n%s", s.bodies[0], s.bodies[1])
				}
				if d := retries[0].Delay; d > 5*time.Millisecond {
					t.Fatalf("delay %v is above MaxBackoff", d)
				}
				return
			}
			if len(retries) != 0 || s.requests() != 1 {
				t.Fatalf("retried a final answer: %+v, %d requests", retries, s.requests())
			}
			if res == nil || res.Attempts != 1 {
				t.Fatalf("response = %+v, want one attempt", res)
			}
			if tc.errNil != (err == nil) {
				t.Fatalf("Do error = %v, want nil: %v", err, tc.errNil)
			}
			if err != nil {
				var re *idemclient.ResponseError
				if !errors.As(err, &re) || re.Response != res {
					t.Fatalf("Do error = %T %v, want a *ResponseError with the response", err, err)
				}
			}
			if got := res.Code(); got != tc.code {
				t.Fatalf("Code() = %q, want %q", got, tc.code)
			}
		})
	}
}

func TestReplayedAndReports(t *testing.T) {
	s := newStub(t, reply{header: map[string]string{"Idempotent-Replayed": "true"},
		body: `{"data":{"createOrder":{"id":"1"}},"extensions":{"idempotency":{"createOrder":{"key":"k","outcome":"replayed","replayed":true}}}}`})
	c := &idemclient.Client{URL: s.URL}
	res, err := c.Do(context.Background(), idemclient.Request{Query: mutation, Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Replayed || res.Outcome("createOrder") != idemcode.OutcomeReplayed || res.Idempotency["createOrder"].Key != "k" {
		t.Fatalf("response = %+v", res)
	}
	if res.Status != 200 || string(res.Data) != `{"createOrder":{"id":"1"}}` {
		t.Fatalf("status %d, data %s", res.Status, res.Data)
	}
}

func TestKeyPlacement(t *testing.T) {
	s := newStub(t, reply{body: okBody})
	c := &idemclient.Client{URL: s.URL, Header: http.Header{"X-Tenant-ID": {"acme"}}, KeyVariable: "k"}
	vars := map[string]any{"amount": 1}
	if _, err := c.Do(context.Background(), idemclient.Request{Query: mutation, Variables: vars, Key: "key-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(context.Background(), idemclient.Request{Query: mutation, Variables: vars, Key: "key-2", KeyInHeader: true,
		Header: http.Header{"X-Request-Id": {"r2"}}}); err != nil {
		t.Fatal(err)
	}
	if len(vars) != 1 {
		t.Fatalf("Do changed the caller's variables: %v", vars)
	}
	var b0, b1 struct{ Variables map[string]any }
	json.Unmarshal(s.bodies[0], &b0)
	json.Unmarshal(s.bodies[1], &b1)
	if b0.Variables["k"] != "key-1" || s.headers[0].Get("Idempotency-Key") != "" {
		t.Fatalf("key as a variable: body %s, header %v", s.bodies[0], s.headers[0])
	}
	if _, ok := b1.Variables["k"]; ok || s.headers[1].Get("Idempotency-Key") != "key-2" {
		t.Fatalf("key in the header: body %s, header %v", s.bodies[1], s.headers[1])
	}
	for i, h := range s.headers {
		if h.Get("X-Tenant-ID") != "acme" || h.Get("Content-Type") != "application/json" {
			t.Fatalf("request %d headers: %v", i, h)
		}
	}
	if s.headers[1].Get("X-Request-Id") != "r2" {
		t.Fatalf("request headers missing: %v", s.headers[1])
	}

	_, err := c.Do(context.Background(), idemclient.Request{Query: mutation, Variables: map[string]any{"k": "other"}, Key: "key-3"})
	if err == nil || !strings.Contains(err.Error(), "one place") {
		t.Fatalf("conflicting key variable: %v", err)
	}
}

func TestNoKey(t *testing.T) {
	s := newStub(t, reply{body: okBody})
	c := &idemclient.Client{URL: s.URL}
	_, err := c.Do(context.Background(), idemclient.Request{Query: mutation})
	if !errors.Is(err, idemclient.ErrNoKey) || s.requests() != 0 {
		t.Fatalf("Do without a key: %v, %d requests", err, s.requests())
	}
}

func TestRetriesExhausted(t *testing.T) {
	s := newStub(t, reply{status: 503})
	var n int
	c := &idemclient.Client{URL: s.URL, MaxAttempts: 4, BaseBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond,
		OnRetry: func(idemclient.Retry) { n++ }}
	res, err := c.Do(context.Background(), idemclient.Request{Query: mutation, Key: "k"})
	if !errors.Is(err, idemclient.ErrRetriesExhausted) {
		t.Fatalf("err = %v", err)
	}
	if s.requests() != 4 || n != 3 || res == nil || res.Status != 503 || res.Attempts != 4 {
		t.Fatalf("requests %d, retries %d, response %+v", s.requests(), n, res)
	}
}

// Retries say so, numbered (the server looks their key up first); the
// first attempt does not.
func TestRetriesNumbered(t *testing.T) {
	s := newStub(t, reply{status: 503}, reply{status: 503}, reply{body: okBody})
	c := &idemclient.Client{URL: s.URL, BaseBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	if _, err := c.Do(context.Background(), idemclient.Request{Query: mutation, Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if s.requests() != 3 {
		t.Fatalf("%d requests, want 3", s.requests())
	}
	for i, want := range []string{"", "1", "2"} {
		if got := s.headers[i].Get(idemcode.HeaderRetry); got != want || (want == "" && len(s.headers[i].Values(idemcode.HeaderRetry)) > 0) {
			t.Errorf("attempt %d: %s %q, want %q", i+1, idemcode.HeaderRetry, got, want)
		}
	}
}

func TestContextCancelledBetweenAttempts(t *testing.T) {
	s := newStub(t, reply{body: gqlErr(string(idemcode.InProgress), "refused", `"retryAfterSeconds":30`)})
	ctx, cancel := context.WithCancel(context.Background())
	c := &idemclient.Client{URL: s.URL, MaxBackoff: time.Minute, OnRetry: func(r idemclient.Retry) {
		if r.Delay != 30*time.Second {
			t.Errorf("delay %v, want the server's 30s (below MaxBackoff)", r.Delay)
		}
		cancel()
	}}
	start := time.Now()
	res, err := c.Do(ctx, idemclient.Request{Query: mutation, Key: "k"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	// Cancelled while it waited the server's 30 s.
	if time.Since(start) > 20*time.Second || s.requests() != 1 || res == nil || res.Code() != string(idemcode.InProgress) {
		t.Fatalf("took %v, %d requests, response %+v", time.Since(start), s.requests(), res)
	}
}

func TestContextCancelledDuringAttempt(t *testing.T) {
	s := newStub(t, reply{stall: time.Minute, body: okBody})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	c := &idemclient.Client{URL: s.URL}
	start := time.Now()
	_, err := c.Do(ctx, idemclient.Request{Query: mutation, Key: "k"})
	// Cancelled in the attempt, whose answer would take a minute.
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 20*time.Second || s.requests() != 1 {
		t.Fatalf("err = %v after %v, %d requests", err, time.Since(start), s.requests())
	}
}

func TestServerHintCappedByMaxBackoff(t *testing.T) {
	for _, first := range []reply{
		{body: gqlErr(string(idemcode.InProgress), "refused", `"retryAfterSeconds":30`)},
		{status: 429, header: map[string]string{"Retry-After": "30"}},
	} {
		s := newStub(t, first, reply{body: okBody})
		var delay time.Duration
		c := &idemclient.Client{URL: s.URL, BaseBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
			OnRetry: func(r idemclient.Retry) { delay = r.Delay }}
		if _, err := c.Do(context.Background(), idemclient.Request{Query: mutation, Key: "k"}); err != nil {
			t.Fatal(err)
		}
		if delay != 20*time.Millisecond {
			t.Fatalf("delay %v, want the hint capped at MaxBackoff (20ms)", delay)
		}
	}
}

// Attempts of 500 ms and 1 s get no answer and are abandoned; the third,
// of 2 s, gets one at once. Each attempt has twice the time of the one
// before: its deadline comes at least twice the first attempt's timeout
// after the previous one's (an attempt starts once the previous one has
// timed out), however long a busy machine takes between attempts.
func TestAttemptTimeoutGrows(t *testing.T) {
	const first = 500 * time.Millisecond
	s := newStub(t, reply{stall: time.Hour}, reply{stall: time.Hour}, reply{body: okBody})
	var (
		reasons   []idemclient.Reason
		deadlines []time.Time
	)
	c := &idemclient.Client{URL: s.URL, AttemptTimeout: first, MaxAttemptTimeout: time.Minute,
		BaseBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		HTTP: &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			dl, _ := req.Context().Deadline()
			deadlines = append(deadlines, dl)
			return http.DefaultTransport.RoundTrip(req)
		})},
		OnRetry: func(r idemclient.Retry) { reasons = append(reasons, r.Reason) }}
	res, err := c.Do(context.Background(), idemclient.Request{Query: mutation, Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 3 || len(reasons) != 2 || reasons[0] != idemclient.ReasonTimeout || reasons[1] != idemclient.ReasonTimeout {
		t.Fatalf("attempts %d, retries %v", res.Attempts, reasons)
	}
	if d := deadlines[1].Sub(deadlines[0]); d < 2*first {
		t.Fatalf("the second attempt's deadline came %v after the first's: want at least %v (1 s more)", d, 2*first)
	}
	if d := deadlines[2].Sub(deadlines[1]); d < 4*first {
		t.Fatalf("the third attempt's deadline came %v after the second's: want at least %v (2 s more)", d, 4*first)
	}
}

// roundTripFunc is an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func TestBackoffBounds(t *testing.T) {
	s := newStub(t, reply{status: 502})
	var delays []time.Duration
	c := &idemclient.Client{URL: s.URL, MaxAttempts: 12, BaseBackoff: time.Microsecond, MaxBackoff: 40 * time.Microsecond,
		OnRetry: func(r idemclient.Retry) { delays = append(delays, r.Delay) }}
	c.Do(context.Background(), idemclient.Request{Query: mutation, Key: "k"})
	for i, d := range delays {
		ceiling := min(time.Microsecond<<i, 40*time.Microsecond)
		if d < 0 || d > ceiling {
			t.Fatalf("retry %d waited %v, above its ceiling %v", i+1, d, ceiling)
		}
	}
}

func TestNewKey(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		k := idemclient.NewKey()
		if err := idem.ValidateKey(k); err != nil || len(k) < 22 || seen[k] {
			t.Fatalf("key %q: %v (seen before: %v)", k, err, seen[k])
		}
		seen[k] = true
	}
}
