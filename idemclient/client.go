package idemclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/timer"
)

// Defaults of the Client fields.
const (
	// DefaultMaxAttempts is the number of attempts Do makes when
	// Client.MaxAttempts is zero (the first attempt and seven retries).
	DefaultMaxAttempts = 8
	// DefaultBaseBackoff is the backoff ceiling of the first retry.
	DefaultBaseBackoff = 100 * time.Millisecond
	// DefaultMaxBackoff bounds every wait between two attempts.
	DefaultMaxBackoff = 5 * time.Second
	// DefaultKeyVariable is the GraphQL variable that carries the key.
	DefaultKeyVariable = "key"
)

// NewKey returns a fresh idempotency key: 26 characters of base32 (130 bits
// from crypto/rand), printable ASCII as the server requires. Make one per
// intent, when the intent is born, keep it with the intent (in the form,
// the job, the outbox row), and send it with every retry of that intent.
func NewKey() string { return rand.Text() }

// ErrNoKey is returned by Do for a Request without a key.
var ErrNoKey = errors.New("idemclient: Request.Key is empty: make one key per intent with NewKey and reuse it on every retry")

// ErrRetriesExhausted is wrapped by the error Do returns when the last of
// Client.MaxAttempts attempts still asked for a retry. The intent may or
// may not have been carried out, and the server may still carry it out
// (see "Never a new key for an undecided intent" in the package doc): call
// Do again later with the same key to learn its outcome, never with a new
// one.
var ErrRetriesExhausted = errors.New("idemclient: retries exhausted")

// Client sends idempotent GraphQL mutations and retries them, with the same
// key and the same body, until the server gives an answer that is final for
// the intent. The zero value is not usable: URL is required. Every other
// field has a working zero value. A Client is safe for concurrent use if its
// fields are not changed while Do runs.
type Client struct {
	// URL is the GraphQL endpoint, e.g. "https://api.example.com/query".
	// Required.
	URL string

	// HTTP sends the requests. Default http.DefaultClient. Its Timeout, if
	// any, applies to each attempt.
	HTTP *http.Client

	// Header is added to every request, e.g. authentication such as
	// Authorization or the example server's X-Tenant-ID.
	Header http.Header

	// KeyVariable is the GraphQL variable that receives Request.Key (unless
	// Request.KeyInHeader is set); the query declares it, as in
	// mutation($key: String!) { createOrder(idempotencyKey: $key, …) }.
	// Default "key".
	KeyVariable string

	// MaxAttempts bounds the attempts of one Do call, the first included.
	// Default 8.
	MaxAttempts int

	// BaseBackoff and MaxBackoff shape the wait between attempts: "full
	// jitter" exponential backoff, a uniformly random wait between 0 and
	// min(MaxBackoff, BaseBackoff·2^(retry-1)). A server's hint
	// (IDEMPOTENCY_IN_PROGRESS's retryAfterSeconds, a Retry-After header)
	// replaces the random wait, capped at MaxBackoff. Defaults 100 ms and
	// 5 s.
	BaseBackoff time.Duration
	MaxBackoff  time.Duration

	// AttemptTimeout bounds each attempt: an attempt still running when it
	// expires is abandoned and retried. Default 0: no per-attempt timeout
	// (ctx and HTTP.Timeout still apply).
	//
	// MaxAttemptTimeout, when greater than AttemptTimeout, makes the timeout
	// double with each attempt up to it. An abandoned attempt is abandoned on
	// the server too (Go's HTTP server cancels a request's context when its
	// client goes away, and the idem hook then rolls the attempt back and
	// frees the key), so a timeout that never grows, set below the time the
	// mutation really takes, would fail every attempt of the intent. Default
	// 0: the timeout does not grow.
	AttemptTimeout    time.Duration
	MaxAttemptTimeout time.Duration

	// OnRetry, if set, is called before each wait between two attempts, on
	// the goroutine that called Do: for logs and metrics. It must not block
	// for long, and must synchronise its own state when Do is called
	// concurrently.
	OnRetry func(Retry)
}

// Request is one idempotent GraphQL operation, usually a mutation.
type Request struct {
	// Query is the GraphQL document.
	Query string
	// OperationName selects an operation of a document that has several.
	OperationName string
	// Variables of the operation. Do does not modify the map; it sends a
	// copy with the key added under Client.KeyVariable.
	Variables map[string]any
	// Key is the idempotency key of the intent, from NewKey. Required.
	Key string
	// KeyInHeader sends the key in the Idempotency-Key header instead of
	// the variables, for servers that accept it there (an operation with one
	// idempotent field whose idempotencyKey argument is optional).
	KeyInHeader bool
	// Header is added to this request's headers, after Client.Header.
	Header http.Header
}

// Reason says why Do retried an attempt.
type Reason string

// The reasons Do retries.
const (
	// ReasonNetwork: the request failed in transit (connection refused or
	// reset, the connection closed before a complete response): whether the
	// server ran it is unknown, which the key makes harmless.
	ReasonNetwork Reason = "network"
	// ReasonTimeout: the attempt ran out of time (Client.AttemptTimeout,
	// HTTP.Timeout or a transport timeout) and was abandoned.
	ReasonTimeout Reason = "timeout"
	// ReasonStatus: HTTP 429, 502, 503 or 504, typically from a proxy or
	// load balancer in front of the server.
	ReasonStatus Reason = "http-status"
	// ReasonInProgress: IDEMPOTENCY_IN_PROGRESS; another attempt with the
	// key (often an abandoned earlier attempt of this Do call) holds it.
	ReasonInProgress Reason = "in-progress"
	// ReasonUnavailable: IDEMPOTENCY_UNAVAILABLE; the server could not reach
	// its record store and did not run the mutation.
	ReasonUnavailable Reason = "unavailable"
	// ReasonReleased: a field was reported with outcome "released"; the
	// mutation failed with a retryable error, was rolled back and the key
	// freed.
	ReasonReleased Reason = "released"
	// ReasonRetryable: another code that idemcode classifies as retryable,
	// such as INTERNAL_SERVER_ERROR (an unexpected error on the server).
	ReasonRetryable Reason = "retryable"
)

// Retry describes one retry, for Client.OnRetry.
type Retry struct {
	// Key is the request's idempotency key.
	Key string
	// Attempt is the number of the attempt that is being retried (1 for
	// the first).
	Attempt int
	// Reason is why it is retried.
	Reason Reason
	// Status is the HTTP status of the attempt, 0 if none was received.
	Status int
	// Code is the extensions.code behind Reason, if any.
	Code string
	// Err is the transport error of ReasonNetwork and ReasonTimeout.
	Err error
	// Delay is the wait before the next attempt.
	Delay time.Duration
}

// Response is the answer Do settled on.
type Response struct {
	// Status and Header are the HTTP status and headers.
	Status int
	Header http.Header
	// Body is the response body as received.
	Body []byte
	// Data is the raw "data" member: the very bytes a replay repeats.
	Data json.RawMessage
	// Errors are the GraphQL errors.
	Errors []Error
	// Extensions are the response's raw "extensions" members.
	Extensions map[string]json.RawMessage
	// Idempotency is extensions.idempotency: what happened to each
	// idempotent field, by response name.
	Idempotency map[string]idemcode.FieldReport
	// Replayed is true when every idempotent field of the operation was
	// replayed from an earlier request's stored result (the
	// Idempotent-Replayed: true header, or the reports).
	Replayed bool
	// Attempts is the number of attempts Do made to get this answer.
	Attempts int
}

// Error is one GraphQL error of a response.
type Error struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path,omitempty"`
	Extensions map[string]any `json:"extensions,omitempty"`
}

// Code returns extensions.code, or "".
func (e Error) Code() string {
	s, _ := e.Extensions["code"].(string)
	return s
}

// RetryAfter returns extensions.retryAfterSeconds (sent with
// IDEMPOTENCY_IN_PROGRESS) and whether it was present.
func (e Error) RetryAfter() (time.Duration, bool) {
	switch v := e.Extensions["retryAfterSeconds"].(type) {
	case float64:
		if v >= 0 {
			return time.Duration(v * float64(time.Second)), true
		}
	case json.Number:
		if f, err := v.Float64(); err == nil && f >= 0 {
			return time.Duration(f * float64(time.Second)), true
		}
	}
	return 0, false
}

// Error implements error: "CODE: message", or the message alone.
func (e Error) Error() string {
	if c := e.Code(); c != "" {
		return c + ": " + e.Message
	}
	return e.Message
}

// Code returns the code of the first error that has one, or "".
func (r *Response) Code() string {
	for _, e := range r.Errors {
		if c := e.Code(); c != "" {
			return c
		}
	}
	return ""
}

// Outcome returns the reported outcome of the idempotent field with this
// response name (its alias, or its name), or "" if there is no report.
func (r *Response) Outcome(field string) string { return r.Idempotency[field].Outcome }

// Decode unmarshals Data into v.
func (r *Response) Decode(v any) error {
	if len(r.Data) == 0 {
		return errors.New("idemclient: the response has no data")
	}
	return json.Unmarshal(r.Data, v)
}

// ResponseError is returned by Do when the final answer for the intent is
// an error: GraphQL errors (a refusal such as IDEMPOTENCY_KEY_REUSED, a
// business error the server stored and replays, a validation error), an
// HTTP status other than 2xx, or a body that is not a GraphQL response. The
// intent is settled: retrying with the same key gets the same answer.
type ResponseError struct {
	Response *Response
	// Err says what was wrong with a body that could not be read as a
	// GraphQL response; nil otherwise.
	Err error
}

// Error implements error.
func (e *ResponseError) Error() string {
	r := e.Response
	switch {
	case e.Err != nil:
		return fmt.Sprintf("idemclient: HTTP %d: %v", r.Status, e.Err)
	case len(r.Errors) == 1:
		return "idemclient: " + r.Errors[0].Error()
	case len(r.Errors) > 1:
		return fmt.Sprintf("idemclient: %s (and %d more errors)", r.Errors[0].Error(), len(r.Errors)-1)
	}
	return fmt.Sprintf("idemclient: HTTP %d", r.Status)
}

// Unwrap returns the body's decoding error, if any.
func (e *ResponseError) Unwrap() error { return e.Err }

// Do sends req and retries it, with the same key and byte for byte the same
// body, until the answer is final for the intent, MaxAttempts attempts have
// been made, or ctx is done (ctx is checked between attempts and cancels
// the attempt in flight).
//
// Do retries after network errors and timeouts, HTTP 429, 502, 503 and 504,
// the codes idemcode classifies as retryable (IDEMPOTENCY_IN_PROGRESS,
// IDEMPOTENCY_UNAVAILABLE, INTERNAL_SERVER_ERROR), and a field reported as
// "released". Anything else is final: success, a replay, a stored business
// error, and the refusals with a final code (IDEMPOTENCY_KEY_REUSED,
// _INVALID, _MISSING, _EXPIRED, IDEMPOTENCY_REQUEST_TOO_LARGE,
// IDEMPOTENCY_RESPONSE_NOT_STORED, BAD_USER_INPUT, UNAUTHENTICATED, ...:
// these win over a retryable signal of another field of the same
// operation).
//
// The error is nil exactly when the final answer is a 2xx response without
// GraphQL errors. A final answer with errors returns the Response and a
// *ResponseError. Otherwise (ErrNoKey, ErrRetriesExhausted, ctx's error, an
// unusable URL, a TLS certificate the transport rejects) the Response is the
// last one received, or nil.
//
// Do requires req.Key and never makes one up. A key invented inside Do
// would be new for every Do call, so a caller that calls Do again after an
// error (a retried job, a restarted process, a second click) would send a
// new intent and could have it carried out twice: the key must be created
// where the intent is created, with NewKey, and kept with it.
func (c *Client) Do(ctx context.Context, req Request) (*Response, error) {
	if req.Key == "" {
		return nil, ErrNoKey
	}
	if c.URL == "" {
		return nil, errors.New("idemclient: Client.URL is empty")
	}
	body, header, err := c.encode(req)
	if err != nil {
		return nil, err
	}
	maxAttempts := c.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}
	var last *Response
	for attempt := 1; ; attempt++ {
		a := c.attempt(ctx, attempt, body, header)
		if a.resp != nil {
			a.resp.Attempts = attempt
			last = a.resp
		}
		if err := ctx.Err(); err != nil && a.reason != "" {
			return last, fmt.Errorf("idemclient: %w after %d attempts; the intent may or may not have been carried out: retry later with the same key", err, attempt)
		}
		if a.reason == "" {
			if a.err != nil {
				return a.resp, a.err
			}
			r := a.resp
			if len(r.Errors) > 0 || r.Status < 200 || r.Status > 299 {
				return r, &ResponseError{Response: r}
			}
			return r, nil
		}
		if attempt >= maxAttempts {
			return last, fmt.Errorf("%w: %d attempts, the last one: %s", ErrRetriesExhausted, attempt, a.describe())
		}
		delay := c.delay(attempt, a.hint)
		if c.OnRetry != nil {
			c.OnRetry(Retry{Key: req.Key, Attempt: attempt, Reason: a.reason, Status: a.status, Code: a.code, Err: a.err, Delay: delay})
		}
		if err := timer.Sleep(ctx, delay); err != nil {
			return last, fmt.Errorf("idemclient: %w after %d attempts; the intent may or may not have been carried out: retry later with the same key", err, attempt)
		}
	}
}

// encode builds the body and headers every attempt of req sends.
func (c *Client) encode(req Request) ([]byte, http.Header, error) {
	header := http.Header{}
	for k, vs := range c.Header {
		header[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	for k, vs := range req.Header {
		header[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	vars := req.Variables
	if req.KeyInHeader {
		header.Set(idemcode.HeaderKey, req.Key)
	} else {
		name := c.KeyVariable
		if name == "" {
			name = DefaultKeyVariable
		}
		if v, ok := vars[name]; ok && v != req.Key {
			return nil, nil, fmt.Errorf("idemclient: variable %q is %v but Request.Key is %q: set the key in one place", name, v, req.Key)
		}
		vars = make(map[string]any, len(req.Variables)+1)
		for k, v := range req.Variables {
			vars[k] = v
		}
		vars[name] = req.Key
	}
	body, err := json.Marshal(struct {
		Query         string         `json:"query"`
		OperationName string         `json:"operationName,omitempty"`
		Variables     map[string]any `json:"variables,omitempty"`
	}{req.Query, req.OperationName, vars})
	if err != nil {
		return nil, nil, fmt.Errorf("idemclient: encode request: %w", err)
	}
	header.Set("Content-Type", "application/json")
	if header.Get("Accept") == "" {
		header.Set("Accept", "application/json")
	}
	return body, header, nil
}

// attemptResult is what one attempt produced. reason is "" when the answer
// is final; err is then a final error or nil.
type attemptResult struct {
	resp   *Response
	reason Reason
	hint   time.Duration // the server's retry-after, 0 if none
	status int
	code   string
	err    error
}

func (a attemptResult) describe() string {
	switch {
	case a.err != nil:
		return fmt.Sprintf("%s: %v", a.reason, a.err)
	case a.code != "":
		return fmt.Sprintf("%s (%s)", a.reason, a.code)
	case a.status != 0 && a.reason == ReasonStatus:
		return fmt.Sprintf("%s (HTTP %d)", a.reason, a.status)
	}
	return string(a.reason)
}

// attempt sends the request once.
func (c *Client) attempt(ctx context.Context, n int, body []byte, header http.Header) attemptResult {
	actx, cancel := ctx, context.CancelFunc(func() {})
	if t := c.attemptTimeout(n); t > 0 {
		actx, cancel = context.WithTimeout(ctx, t)
	}
	defer cancel()
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return attemptResult{err: fmt.Errorf("idemclient: %w", err)}
	}
	hreq.Header = header.Clone()
	if n > 1 {
		hreq.Header.Set(idemcode.HeaderRetry, strconv.Itoa(n-1))
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	hres, err := hc.Do(hreq)
	if err != nil {
		return transportFailure(actx, err, 0)
	}
	defer hres.Body.Close()
	raw, err := io.ReadAll(hres.Body)
	if err != nil {
		return transportFailure(actx, err, hres.StatusCode)
	}
	resp := &Response{Status: hres.StatusCode, Header: hres.Header, Body: raw}
	switch hres.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		_ = resp.decode() // for the caller's information, should retries run out
		return attemptResult{resp: resp, reason: ReasonStatus, status: hres.StatusCode, hint: retryAfterHeader(hres.Header)}
	}
	if err := resp.decode(); err != nil {
		return attemptResult{resp: resp, status: hres.StatusCode, err: &ResponseError{Response: resp, Err: err}}
	}
	reason, code, hint := classify(resp)
	return attemptResult{resp: resp, reason: reason, code: code, hint: hint, status: hres.StatusCode}
}

// transportFailure classifies an error of the round trip or of reading the
// body. The caller checks the parent context first.
func transportFailure(actx context.Context, err error, status int) attemptResult {
	var cert *tls.CertificateVerificationError
	if errors.As(err, &cert) {
		return attemptResult{status: status, err: fmt.Errorf("idemclient: %w", err)}
	}
	var ne net.Error
	if errors.Is(actx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) {
		return attemptResult{reason: ReasonTimeout, status: status, err: err}
	}
	return attemptResult{reason: ReasonNetwork, status: status, err: err}
}

// classify reads a decoded GraphQL response: the reason to retry it, or ""
// when it is final. A final code (idemcode) wins over the retryable signals
// of other fields: no retry changes it.
func classify(r *Response) (Reason, string, time.Duration) {
	var (
		reason Reason
		code   string
		hint   time.Duration
	)
	for _, e := range r.Errors {
		c := idemcode.Code(e.Code())
		switch {
		case c.Final():
			return "", "", 0
		case c == idemcode.InProgress:
			reason, code = ReasonInProgress, string(c)
			if d, ok := e.RetryAfter(); ok && d > hint {
				hint = d
			}
		case c == idemcode.Unavailable:
			if reason != ReasonInProgress {
				reason, code = ReasonUnavailable, string(c)
			}
		case c.Retryable() && code == "":
			code = string(c)
		}
	}
	if reason != "" {
		return reason, code, hint
	}
	for _, f := range r.Idempotency {
		if f.Outcome == idemcode.OutcomeReleased {
			return ReasonReleased, "", hint
		}
	}
	if code != "" {
		return ReasonRetryable, code, hint
	}
	return "", "", hint
}

// decode fills the GraphQL members of r from r.Body.
func (r *Response) decode() error {
	var doc struct {
		Data       json.RawMessage            `json:"data"`
		Errors     []Error                    `json:"errors"`
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		return fmt.Errorf("the body is not a GraphQL response: %w", err)
	}
	if doc.Data == nil && doc.Errors == nil {
		return errors.New("the body is not a GraphQL response: it has neither data nor errors")
	}
	r.Data, r.Errors, r.Extensions = doc.Data, doc.Errors, doc.Extensions
	if raw, ok := doc.Extensions["idempotency"]; ok {
		if err := json.Unmarshal(raw, &r.Idempotency); err != nil {
			return fmt.Errorf("extensions.idempotency: %w", err)
		}
	}
	all := len(r.Idempotency) > 0
	for _, f := range r.Idempotency {
		all = all && f.Outcome == idemcode.OutcomeReplayed
	}
	r.Replayed = strings.EqualFold(r.Header.Get(idemcode.HeaderReplayed), "true") || all
	return nil
}

// retryAfterHeader reads Retry-After: seconds or an HTTP date.
func retryAfterHeader(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t))
	}
	return 0
}

// attemptTimeout is the timeout of attempt n (1-based), 0 for none.
func (c *Client) attemptTimeout(n int) time.Duration {
	t := c.AttemptTimeout
	if t <= 0 {
		return 0
	}
	if c.MaxAttemptTimeout > t {
		for i := 1; i < n && t < c.MaxAttemptTimeout; i++ {
			t *= 2
		}
		t = min(t, c.MaxAttemptTimeout)
	}
	return t
}

// delay is the wait after attempt n (1-based) failed: full jitter, or the
// server's hint. Both are capped at MaxBackoff.
//
// The hint of IDEMPOTENCY_IN_PROGRESS is the time left on the lease of the
// attempt that holds the key, rounded up to whole seconds: an upper bound.
// A live owner usually finishes well before it, and an abandoned one is
// rolled back and frees the key at once, so the wait is capped at
// MaxBackoff rather than sitting out a lease of, say, 30 s; a retry that
// comes too early just gets IN_PROGRESS again. Retry-After of 429/503 is
// treated the same way, so that a proxy's hint cannot stall a Do call
// beyond MaxBackoff per retry. A hint shorter than the random wait is not
// used to shorten it.
func (c *Client) delay(n int, hint time.Duration) time.Duration {
	base, maxB := c.BaseBackoff, c.MaxBackoff
	if base <= 0 {
		base = DefaultBaseBackoff
	}
	if maxB <= 0 {
		maxB = DefaultMaxBackoff
	}
	ceiling := base
	for i := 1; i < n && ceiling < maxB; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, maxB)
	d := time.Duration(mathrand.Int64N(int64(ceiling) + 1))
	if hint > 0 {
		d = max(d, min(hint, maxB))
	}
	return d
}
