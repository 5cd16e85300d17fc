package idem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// send posts a GraphQL request as org with extra headers.
func send(t *testing.T, be *testapp.Bench, org, query string, vars map[string]any, header http.Header) *testkit.Response {
	t.Helper()
	r, err := be.Send(org, query, vars, header)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// inFlight starts createShipment with key and holds its resolver until the
// returned function is called; that function returns the held request's
// answer.
func inFlight(t *testing.T, be *testapp.Bench, org, key string) (finish func() *testkit.Response) {
	t.Helper()
	started, release := make(chan struct{}), make(chan struct{})
	be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
		if idem.ClaimFromContext(ctx).Key == key {
			close(started)
			<-release
		}
		return nil
	}
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	// A test that fails while the request is held must still let it end,
	// or the server's Close waits for it for ever.
	t.Cleanup(free)
	done := make(chan *testkit.Response, 1)
	go func() { done <- be.Post(org, key, 100) }()
	<-started
	return func() *testkit.Response {
		free()
		return <-done
	}
}

// A duplicate of an attempt in flight is told to come back when the
// mutation is likely done, going by how long it has recently been taking
// (here 1.5 s and what the request took besides, where the lease is 10 s);
// when every idempotent field of the operation is in progress, the HTTP
// answer carries Retry-After too.
func TestRetryAfterFollowsRecentDurations(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, b idemtest.Kind) {
		be, _ := loggedBench(t, b, idem.Config{})
		be.Resolver.Hook = func(context.Context, *ent.Shipment) error { time.Sleep(1500 * time.Millisecond); return nil }
		began := time.Now()
		if r := be.Post("org-1", "train", 100); len(r.Errors) > 0 {
			t.Fatalf("training attempt: %s", r.Body)
		}
		// What the hook measured, and the round trip besides: 2 s, rounded
		// up, on an idle machine; a busy one adds to it.
		took := time.Since(began)

		finish := inFlight(t, be, "org-1", "slow")
		dup := send(t, be, "org-1", testapp.CreateShipment, map[string]any{"k": "slow", "g": 100}, nil)
		if dup.Code() != string(idemcode.InProgress) {
			t.Fatalf("duplicate: %s", dup.Body)
		}
		hint := dup.Errors[0].Extensions["retryAfterSeconds"].(float64)
		if hint < 1 || hint > math.Ceil(took.Seconds()) {
			t.Fatalf("retryAfterSeconds %v for a mutation that took %v (lease 10s): want from 1 to %v", hint, took, math.Ceil(took.Seconds()))
		}
		if h := dup.Header.Get("Retry-After"); h != strconv.Itoa(int(hint)) {
			t.Fatalf("Retry-After %q, want %v", h, hint)
		}

		// One field in progress, another replayed: no Retry-After. (A
		// field that runs would wait for the SQLite write lock the held
		// attempt has.)
		both := `mutation {
			a: createShipment(idempotencyKey: "slow", input: {destination: "Lyon", weightGrams: 100}) { id destination weightGrams label }
			b: createShipment(idempotencyKey: "train", input: {destination: "Lyon", weightGrams: 100}) { id destination weightGrams label } }`
		mixed := send(t, be, "org-1", both, nil, nil)
		if mixed.Idempotency["a"].Outcome != idemcode.OutcomeRefused || mixed.Idempotency["b"].Outcome != idemcode.OutcomeReplayed {
			t.Fatalf("mixed: %s", mixed.Body)
		}
		if h := mixed.Header.Get("Retry-After"); h != "" {
			t.Fatalf("Retry-After %q on an operation with a field that ran", h)
		}

		// Past the mutation's usual duration, the hint is never less than
		// a second. (Four seconds of lease are left, less the time this
		// test has taken since the claim: slack for a loaded machine,
		// where the lease must not run out.)
		be.Clock.Advance(6 * time.Second)
		late := send(t, be, "org-1", testapp.CreateShipment, map[string]any{"k": "slow", "g": 100}, nil)
		if late.Code() != string(idemcode.InProgress) || late.Errors[0].Extensions["retryAfterSeconds"].(float64) != 1 || late.Header.Get("Retry-After") != "1" {
			t.Fatalf("about 4 s of lease left: %s (Retry-After %q)", late.Body, late.Header.Get("Retry-After"))
		}
		be.Clock.Advance(-6 * time.Second)
		if r := finish(); len(r.Errors) > 0 {
			t.Fatalf("held attempt: %s", r.Body)
		}
	})
}

// The hint is HTTP's too: an in-progress answer has no other header than
// the ones the hook always sets.
func TestRetryAfterHeaderOnlyWhenInProgress(t *testing.T) {
	be, _ := loggedBench(t, idemtest.SQLite, idem.Config{})
	r := send(t, be, "org-1", testapp.CreateShipment, map[string]any{"k": "k", "g": 100}, nil)
	if len(r.Errors) > 0 || r.Header.Get("Retry-After") != "" {
		t.Fatalf("executed: %s (Retry-After %q)", r.Body, r.Header.Get("Retry-After"))
	}
	r = send(t, be, "org-1", testapp.CreateShipment, map[string]any{"k": "k", "g": 100}, nil)
	if !strings.Contains(string(r.Body), `"replayed"`) || r.Header.Get("Retry-After") != "" {
		t.Fatalf("replayed: %s (Retry-After %q)", r.Body, r.Header.Get("Retry-After"))
	}
}

// sendContext posts createShipment with key under ctx.
func sendContext(ctx context.Context, be *testapp.Bench, org, key string) (*http.Response, error) {
	body, _ := json.Marshal(map[string]any{"query": testapp.CreateShipment, "variables": map[string]any{"k": key, "g": 100}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, be.Endpoint, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Org", org)
	res, err := http.DefaultClient.Do(req)
	if err == nil {
		res.Body.Close()
	}
	return res, err
}
