// Package testkit is the harness every in-process suite shares: one loop
// over the backends, a fresh database set up with an application's schema,
// and an application served over HTTP with one way to send it GraphQL and
// read what came back. The applications are in its subpackages: testapp
// (the test application, the bench of the protocol's tests) and
// exampletest (the example's orders and payments); proctest runs the
// commands as processes.
//
// It imports testing and is meant for _test.go files only.
package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"entgo.io/ent/dialect/sql/schema"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
)

// Each runs test once per backend (idemtest.Kinds: SQLite, PostgreSQL,
// PostgreSQL partitioned by tenant and MariaDB), in parallel.
func Each(t *testing.T, test func(t *testing.T, b idemtest.Kind)) { EachOf(t, idemtest.Kinds(), test) }

// EachRiver runs test once per backend River runs on (idemtest.RiverKinds:
// all but MariaDB), in parallel: the suites of idemoutbox, and those of the
// example application not yet run on MariaDB (its receipts' run there:
// graph's receipt tests use Each).
func EachRiver(t *testing.T, test func(t *testing.T, b idemtest.Kind)) {
	EachOf(t, idemtest.RiverKinds(), test)
}

// EachOf runs test once per backend of kinds, in parallel.
func EachOf(t *testing.T, kinds []idemtest.Kind, test func(t *testing.T, b idemtest.Kind)) {
	for _, b := range kinds {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			test(t, b)
		})
	}
}

// setupMu serializes the schemas' creation: ent's Schema.Create is not
// safe for concurrent use (it writes the package's table descriptions),
// and the suites run their backends in parallel.
var setupMu sync.Mutex

// Setup makes an application's tables in db (idemtest's DB.Setup: create,
// then, on PostgresPartitioned, the partitioning), or fails the test.
//
//	testkit.Setup(t, db, client.IdempotencyBackend(), client.Schema.Create)
func Setup(t testing.TB, db *idemtest.DB, backend idembackend.Backend, create func(context.Context, ...schema.MigrateOption) error) {
	t.Helper()
	setupMu.Lock()
	err := db.Setup(context.Background(), backend, create)
	setupMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
}

// Server is an application served over HTTP for one test, closed by the
// test's cleanup.
type Server struct {
	*httptest.Server
	// Endpoint is the GraphQL endpoint's URL.
	Endpoint string
	// TenantHeader is the request header that carries the tenant (the
	// application's demo authentication).
	TenantHeader string

	t testing.TB
}

// Serve serves h, with GraphQL at path below the server's URL, and the
// tenant in the header tenantHeader.
func Serve(t testing.TB, h http.Handler, path, tenantHeader string) *Server {
	s := &Server{Server: httptest.NewServer(h), TenantHeader: tenantHeader, t: t}
	s.Endpoint = s.URL + path
	CloseInCleanup(t, "the test's HTTP server", s.Close)
	return s
}

// Response is a GraphQL response as the client received it.
type Response struct {
	Status int
	Header http.Header
	// Body is the response as received.
	Body []byte
	Data json.RawMessage `json:"data"`
	// Errors, decoded; RawErrors, as sent.
	Errors     []Error         `json:"errors"`
	RawErrors  json.RawMessage `json:"-"`
	Extensions map[string]any  `json:"extensions"`
	// Idempotency is extensions.idempotency: what the hook did with each
	// idempotent field, by response name.
	Idempotency map[string]idemcode.FieldReport `json:"-"`
	// Replayed is the Idempotent-Replayed header.
	Replayed bool `json:"-"`
}

// Error is one error of a GraphQL response.
type Error struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// Code is the error's extensions.code.
func (e Error) Code() string { s, _ := e.Extensions["code"].(string); return s }

// Code returns the code of the first error, or "" if there is none.
func (r *Response) Code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	return r.Errors[0].Code()
}

// Outcome is what the hook reports it did with the idempotent field of
// response name field (idemcode.OutcomeExecuted, …), or "".
func (r *Response) Outcome(field string) string { return r.Idempotency[field].Outcome }

// Send posts a GraphQL request as tenant ("" for none), with header added.
func (s *Server) Send(tenant, query string, vars map[string]any, header http.Header) (*Response, error) {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, err := http.NewRequest(http.MethodPost, s.Endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if tenant != "" {
		req.Header.Set(s.TenantHeader, tenant)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	r := &Response{Status: res.StatusCode, Header: res.Header, Replayed: res.Header.Get(idemcode.HeaderReplayed) == "true"}
	if r.Body, err = io.ReadAll(res.Body); err != nil {
		return nil, err
	}
	var parts struct {
		Errors     json.RawMessage `json:"errors"`
		Extensions struct {
			Idempotency map[string]idemcode.FieldReport `json:"idempotency"`
		} `json:"extensions"`
	}
	if err := json.Unmarshal(r.Body, r); err != nil {
		return r, fmt.Errorf("decode %q: %w", r.Body, err)
	}
	if err := json.Unmarshal(r.Body, &parts); err != nil {
		return r, fmt.Errorf("decode %q: %w", r.Body, err)
	}
	r.RawErrors, r.Idempotency = parts.Errors, parts.Extensions.Idempotency
	return r, nil
}

// GQL is Send without headers for a test: a request that fails, or an
// answer that is not JSON, marks the test failed (with t.Error, so that
// GQL may be called from any goroutine) and returns what it has.
func (s *Server) GQL(tenant, query string, vars map[string]any) *Response {
	r, err := s.Send(tenant, query, vars, nil)
	if err != nil {
		s.t.Error(err)
		if r == nil {
			r = &Response{}
		}
	}
	return r
}

// Logger returns a logger that writes records of level Warn and above to
// t's log, which go test prints when the test fails (or with -v): a test
// that fails on an IDEMPOTENCY_UNAVAILABLE then says what the store
// answered. What is logged once the test's cleanup has begun is dropped,
// since the hook's background work (a release retried until its lease
// ends) may outlive the test, and t must not be used after it.
func Logger(t testing.TB) *slog.Logger {
	w := &testLog{t: t}
	t.Cleanup(w.stop)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testLog struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (w *testLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLog) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}

// WaitBound is how long Eventually waits for a condition before it fails
// the test: long enough that no machine busy with other work outlasts it
// where the condition is meant to hold (the conditions are met in
// milliseconds to seconds on an idle machine), short enough to fail well
// within the package's timeout.
const WaitBound = time.Minute

// CloseInCleanup makes t's cleanup call shut, which closes what (a pool,
// a server), and fail the test rather than wait for ever when shut has not
// returned after WaitBound. A pool closes once its connections are back and
// an HTTP server once its requests have ended: a test that failed while it
// held a connection, or a resolver it had blocked, would otherwise hang
// until the package's timeout, its own failure unreported.
func CloseInCleanup(t testing.TB, what string, shut func()) {
	t.Cleanup(func() {
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			shut()
		}()
		select {
		case <-closed:
		case <-time.After(WaitBound):
			t.Errorf("%s still not closed %v after the test: something it lent (a connection, a request) was not given back; not waiting for it", what, WaitBound)
		}
	})
}

// Eventually polls cond until it holds, and fails the test if it still
// does not after WaitBound, saying what was awaited (format and args). A
// test waits for a condition this way, never for a duration that a busy
// machine may outlast.
func Eventually(t testing.TB, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(WaitBound)
	for delay := time.Millisecond; !cond(); delay = min(2*delay, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not the case after %v: "+format, append([]any{WaitBound}, args...)...)
		}
		time.Sleep(delay)
	}
}
