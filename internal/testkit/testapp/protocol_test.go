package testapp_test

// The protocol's behaviour, whatever the application: this package's suites
// are where it is tested, on the test application. The example's own
// behaviour (orders, payments, the provider, the header form of the key)
// is tested in package graph.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	"github.com/goovo/idem/internal/testkit/testapp/graph"
)

// countRuns makes the resolver count its runs.
func countRuns(be *testapp.Bench) *atomic.Int32 {
	var runs atomic.Int32
	be.Resolver.Hook = func(context.Context, *ent.Shipment) error {
		runs.Add(1)
		return nil
	}
	return &runs
}

func TestKeyReusedForAnotherRequest(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		first := be.Post("org-1", "k", 700)
		if len(first.Errors) > 0 {
			t.Fatalf("first call: %s", first.Body)
		}

		other := be.Post("org-1", "k", 800)
		if other.Code() != string(idemcode.KeyReused) || !strings.Contains(other.Errors[0].Message, "arguments") {
			t.Fatalf("different weight: %s", other.Body)
		}
		if other.Errors[0].Extensions["idempotencyKey"] != "k" {
			t.Fatalf("error does not carry the key: %s", other.Body)
		}
		narrower := be.GQL("org-1", `mutation { createShipment(idempotencyKey: "k", input: {destination: "Lyon", weightGrams: 700}) { id } }`, nil)
		if narrower.Code() != string(idemcode.KeyReused) || !strings.Contains(narrower.Errors[0].Message, "selection set") {
			t.Fatalf("different selection: %s", narrower.Body)
		}
		// The same action asked with other fields (a resume after a
		// deploy): a new key would carry it out again.
		if msg := narrower.Errors[0].Message; strings.Contains(msg, "use a new key for a new intent") || !strings.Contains(msg, "resend the request as it was first sent") {
			t.Fatalf("the refusal of a different selection advises: %s", msg)
		}
		if !strings.Contains(other.Errors[0].Message, "use a new key for a new intent") {
			t.Fatalf("the refusal of different arguments advises: %s", other.Errors[0].Message)
		}
		if other.Replayed || narrower.Replayed {
			t.Fatal("a refusal is marked replayed")
		}

		// Nothing changed: the record still replays the first result.
		again := be.Post("org-1", "k", 700)
		if !bytes.Equal(again.Data, first.Data) || !again.Replayed {
			t.Fatalf("record changed:\nfirst: %s\nnow:   %s", first.Data, again.Data)
		}
		if n := be.Count(); n != 1 {
			t.Fatalf("%d shipments, want 1", n)
		}
	})
}

func TestInvalidKeysAreRejectedBeforeAnything(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		runs := countRuns(be)
		for name, key := range map[string]string{
			"empty":          "",
			"256 characters": strings.Repeat("k", 256),
			"control":        "abc\x07def",
			"newline":        "abc\ndef",
			"non-ASCII":      "clé-42",
			"DEL":            "abc\x7f",
		} {
			if r := be.Post("org-1", key, 100); r.Code() != string(idemcode.KeyInvalid) {
				t.Errorf("%s key: %s", name, r.Body)
			}
		}
		if n := be.Count(); n != 0 {
			t.Fatalf("%d shipments stored for invalid keys", n)
		}
		if n := runs.Load(); n != 0 {
			t.Fatalf("the resolver ran %d times for invalid keys", n)
		}
		// The limits are inclusive.
		if r := be.Post("org-1", strings.Repeat("k", idem.MaxKeyLength), 100); len(r.Errors) > 0 {
			t.Fatalf("255-character key: %s", r.Body)
		}
		// No tenant: nothing runs either.
		if r := be.Post("", "anonymous", 100); r.Code() != string(idemcode.Unauthenticated) {
			t.Fatalf("no tenant: %s", r.Body)
		}
		// A key that is not a string is the request's error, before anything.
		if r := be.GQL("org-1", `mutation { createShipment(idempotencyKey: 5, input: {destination: "Lyon", weightGrams: 1}) { id } }`, nil); len(r.Errors) == 0 {
			t.Fatalf("integer key accepted: %s", r.Body)
		}
		if n, ran := be.Count(), runs.Load(); n != 1 || ran != 1 {
			t.Fatalf("%d shipments, %d runs; want 1 and 1", n, ran)
		}
	})
}

func TestStoreDownAnswersUnavailable(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		dsn := "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"
		if b == idemtest.SQLite {
			dsn = "/nonexistent-directory/idem.db"
		}
		drv, err := idemdb.Open(dsn)
		if err != nil {
			t.Fatal(err)
		}
		down := ent.NewClient(ent.Driver(drv))
		t.Cleanup(func() { down.Close() })
		resolver := &graph.Resolver{Client: down}
		var runs atomic.Int32
		resolver.Hook = func(context.Context, *ent.Shipment) error { runs.Add(1); return nil }
		be.Server.Config.Handler = be.Handler(down, resolver, idem.Config{})

		r := be.Post("org-1", "ship-down", 100)
		if r.Code() != string(idemcode.Unavailable) {
			t.Fatalf("store down: %s", r.Body)
		}
		msg := strings.ToLower(r.Errors[0].Message)
		for _, leak := range []string{"dial", "connect", "refused", "sqlite", "no such", "unable to open"} {
			if strings.Contains(msg, leak) {
				t.Fatalf("database text reached the client: %s", r.Body)
			}
		}
		if n := runs.Load(); n != 0 {
			t.Fatalf("the resolver ran %d times", n)
		}
	})
}

// The record keeps exactly the bytes the client got, as JSON: read back
// from the database, not from the response.
func TestStoredResponseIsValidJSON(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
			if s.WeightGrams == 13 {
				return idem.Final(errors.New("unlucky weight"))
			}
			return nil
		}
		type stored struct {
			V      int               `json:"v"`
			Null   string            `json:"null"`
			Data   json.RawMessage   `json:"data"`
			Errors []json.RawMessage `json:"errors"`
		}
		read := func(key string) stored {
			t.Helper()
			rec := be.Record("org-1", key)
			if rec.IdempotencyResponse == nil {
				t.Fatalf("no stored response of %s", key)
			}
			raw := *rec.IdempotencyResponse
			if !json.Valid(raw) {
				t.Fatalf("stored response of %s is not JSON: %q", key, raw)
			}
			var s stored
			if err := json.Unmarshal(raw, &s); err != nil || s.V != 1 {
				t.Fatalf("stored response of %s: %s (%v)", key, raw, err)
			}
			return s
		}

		ok := be.Post("org-1", "ok", 500)
		var live struct{ CreateShipment json.RawMessage }
		if err := json.Unmarshal(ok.Data, &live); err != nil || len(ok.Errors) > 0 {
			t.Fatalf("%s: %v", ok.Body, err)
		}
		if s := read("ok"); !bytes.Equal(s.Data, live.CreateShipment) || len(s.Errors) != 0 || s.Null != "" {
			t.Fatalf("stored %s, the client got %s", s.Data, live.CreateShipment)
		}

		failed := be.Post("org-1", "failed", 13)
		if len(failed.Errors) != 1 || failed.Errors[0].Message != "unlucky weight" {
			t.Fatalf("final error: %s", failed.Body)
		}
		s := read("failed")
		if len(s.Errors) != 1 || s.Null == "" || !strings.Contains(string(s.Errors[0]), "unlucky weight") {
			t.Fatalf("stored failure: %+v", s)
		}
		if !json.Valid(failed.RawErrors) || !bytes.Contains(failed.RawErrors, []byte("unlucky weight")) {
			t.Fatalf("live errors: %s", failed.RawErrors)
		}
	})
}

// Atomic mode: 100 concurrent duplicates give exactly one row and 100
// identical results, none of them IN_PROGRESS.
func TestAtomicModeDuplicatesReplay(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		const n = 100
		const atomicCreate = `mutation($k: String!) { createShipmentAtomic(idempotencyKey: $k, input: {destination: "Lyon", weightGrams: 990}) { id destination } }`
		responses := make([]*testkit.Response, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				r, err := be.Send("org-1", atomicCreate, map[string]any{"k": "atomic"}, nil)
				if err != nil {
					t.Errorf("request %d: %v", i, err)
				}
				responses[i] = r
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
		replays := 0
		for i, r := range responses {
			if len(r.Errors) > 0 || !bytes.Equal(r.Data, responses[0].Data) {
				t.Fatalf("response %d: %s (first: %s)", i, r.Body, responses[0].Body)
			}
			if r.Replayed {
				replays++
			}
		}
		if replays != n-1 {
			t.Fatalf("%d replays, want %d", replays, n-1)
		}
		if count := be.Count(); count != 1 {
			t.Fatalf("%d shipments, want 1", count)
		}
	})
}

// A request that says it is a retry (Idempotency-Retry, as idemclient's
// retries do) gets the answer it would get without saying so, from a
// process that has never seen its key: a new key runs once, a finished key
// replays the same bytes in either mode, a key reused for other arguments
// is refused, and a key whose first attempt is still running is in
// progress, then replays once it is done.
func TestRetryHintChangesNoAnswer(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		runs := countRuns(be)
		// Each call is another process: a hook that has seen no key.
		elsewhere := func() *testkit.Server {
			return testkit.Serve(t, be.Handler(be.Client, be.Resolver, idem.Config{}), "/query", "X-Org")
		}
		retry := func(s *testkit.Server, query string, vars map[string]any) *testkit.Response {
			t.Helper()
			r, err := s.Send("org-1", query, vars, http.Header{idemcode.HeaderRetry: {"1"}})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		const atomicCreate = `mutation($k: String!) { createShipmentAtomic(idempotencyKey: $k, input: {destination: "Lyon", weightGrams: 990}) { id destination } }`

		r := retry(elsewhere(), testapp.CreateShipment, map[string]any{"k": "new", "g": 1})
		if r.Outcome("createShipment") != idemcode.OutcomeExecuted || r.Replayed || runs.Load() != 1 {
			t.Fatalf("new key sent as a retry: %s (runs %d)", r.Body, runs.Load())
		}
		r = retry(elsewhere(), atomicCreate, map[string]any{"k": "new-atomic"})
		if r.Outcome("createShipmentAtomic") != idemcode.OutcomeExecuted || r.Replayed {
			t.Fatalf("new atomic key sent as a retry: %s", r.Body)
		}

		for _, c := range []struct {
			field, query string
			vars         map[string]any
		}{
			{"createShipment", testapp.CreateShipment, map[string]any{"k": "done", "g": 2}},
			{"createShipmentAtomic", atomicCreate, map[string]any{"k": "done-atomic"}},
		} {
			first := be.GQL("org-1", c.query, c.vars)
			if len(first.Errors) > 0 {
				t.Fatalf("%s: %s", c.field, first.Body)
			}
			r := retry(elsewhere(), c.query, c.vars)
			if !r.Replayed || r.Outcome(c.field) != idemcode.OutcomeReplayed || !bytes.Equal(r.Data, first.Data) {
				t.Fatalf("%s: retry in another process %s, first answer %s", c.field, r.Body, first.Body)
			}
		}
		if r := retry(elsewhere(), testapp.CreateShipment, map[string]any{"k": "done", "g": 3}); r.Code() != string(idemcode.KeyReused) {
			t.Fatalf("key reused for other arguments, sent as a retry: %s", r.Body)
		}

		started, release := make(chan struct{}), make(chan struct{})
		var releaseOnce sync.Once
		unblock := func() { releaseOnce.Do(func() { close(release) }) }
		t.Cleanup(unblock) // a failed assertion must not leave a handler blocked
		be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
			if key, _ := idem.KeyFromContext(ctx); key == "blocked" {
				close(started)
				<-release
			}
			return nil
		}
		firstDone := make(chan *testkit.Response)
		go func() { firstDone <- be.Post("org-1", "blocked", 4) }()
		<-started
		if r := retry(elsewhere(), testapp.CreateShipment, map[string]any{"k": "blocked", "g": 4}); r.Code() != string(idemcode.InProgress) {
			t.Fatalf("retry of a key in flight elsewhere: %s", r.Body)
		}
		unblock()
		first := <-firstDone
		if r := retry(elsewhere(), testapp.CreateShipment, map[string]any{"k": "blocked", "g": 4}); !r.Replayed || !bytes.Equal(r.Data, first.Data) {
			t.Fatalf("retry once the first is done: %s, first %s", r.Body, first.Body)
		}
		if n := be.Count(); n != 5 {
			t.Fatalf("%d shipments, want 5 (new, new-atomic, done, done-atomic, blocked)", n)
		}
	})
}
