package idem_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// A replayed error points at this request's document: its path follows the
// field's new alias and its location the field's position here, not in the
// document of the request that stored it.
func TestReplayedErrorsPointIntoThisRequest(t *testing.T) {
	be, _ := loggedBench(t, idemtest.SQLite, idem.Config{})
	const id = "6f1c9a52-7f0e-4a7b-9a53-3b1d2c4e5f60" // no such shipment: a final error, stored
	first := send(t, be, "org-1", `mutation { approveShipment(idempotencyKey: "loc", id: "`+id+`") { id } }`, nil, nil)
	if first.Code() != "MUTATION_FAILED" || !strings.Contains(string(first.Body), `"locations":[{"line":1,"column":12}]`) {
		t.Fatalf("first: %s", first.Body)
	}
	retry := send(t, be, "org-1", "mutation {\n\n     again: approveShipment(idempotencyKey: \"loc\", id: \""+id+"\") { id } }", nil, nil)
	if retry.Idempotency["again"].Outcome != idemcode.OutcomeReplayed ||
		!strings.Contains(string(retry.Body), `"path":["again"],"locations":[{"line":3,"column":6}]`) {
		t.Fatalf("replay: %s", retry.Body)
	}
}

// A client that hangs up mid-mutation does not abort its attempt: the
// resolver's context is not cancelled, the result is stored, and the key's
// next request replays it.
func TestClientThatHangsUpDoesNotAbortItsAttempt(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, b idemtest.Kind) {
		be, _ := loggedBench(t, b, idem.Config{})
		started, proceed := make(chan struct{}), make(chan struct{})
		resolverErr := make(chan error, 1)
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			close(started)
			<-proceed
			resolverErr <- ctx.Err()
			return nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := sendContext(ctx, be, "org-1", "gone")
			done <- err
		}()
		<-started
		cancel()
		if err := <-done; err == nil {
			t.Fatal("the request answered before its client hung up")
		}
		close(proceed)
		if err := <-resolverErr; err != nil {
			t.Fatalf("the resolver's context ended when its client hung up: %v", err)
		}
		testkit.Eventually(t, func() bool { return finished(t, be, "org-1", "gone") }, "the result stored")
		idemtest.RequireState(t, be.Client.IdempotencyBackend(), "org-1", "gone", idemtest.Succeeded)
		be.Resolver.Hook = nil
		if r := be.Post("org-1", "gone", 100); len(r.Errors) > 0 || r.Outcome("createShipment") != idemcode.OutcomeReplayed {
			t.Fatalf("the key's next request: %s", r.Body)
		}
	})
}

// An attempt that runs past its deadline (Config.AttemptTimeout) is rolled
// back and its claim released, and the log says so without a spurious
// "rollback failed": database/sql has rolled the transaction back already.
func TestAttemptPastItsDeadlineIsReleasedQuietly(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, b idemtest.Kind) {
		be, logs := loggedBench(t, b, idem.Config{AttemptTimeout: 2 * time.Second})
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			<-ctx.Done()
			return ctx.Err()
		}
		if r := be.Post("org-1", "slow", 100); r.Outcome("createShipment") != idemcode.OutcomeReleased {
			t.Fatalf("the attempt past its deadline: %s", r.Body)
		}
		if l := logs.String(); !strings.Contains(l, "claim released") || !strings.Contains(l, "AttemptTimeout") || strings.Contains(l, "rollback failed") {
			t.Fatalf("log:\n%s", l)
		}
		be.Resolver.Hook = nil
		if r := be.Post("org-1", "slow", 100); len(r.Errors) > 0 || r.Outcome("createShipment") != idemcode.OutcomeExecuted {
			t.Fatalf("retry after the attempt's deadline: %s", r.Body)
		}
	})
}

// finished reports whether the record of (tenant, key) holds a result.
func finished(t *testing.T, be *testapp.Bench, tenant, key string) bool {
	t.Helper()
	hook, err := idem.New(idem.Config{Backend: be.Client.IdempotencyBackend()})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := idemctl.New(hook).Inspect(context.Background(), tenant, key)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs) > 0 && recs[0].State != idemtest.Pending
}

// Hook.Shutdown drains: an attempt still running when the drain ends is
// cancelled, rolled back and its claim released (a retry runs it at once),
// and an attempt that begins after Shutdown is refused with
// IDEMPOTENCY_UNAVAILABLE without claiming its key.
func TestShutdownReleasesWhatTheDrainLeft(t *testing.T) {
	be, _ := loggedBench(t, idemtest.SQLite, idem.Config{})
	started := make(chan struct{})
	be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}
	answered := make(chan *testkit.Response, 1)
	go func() { answered <- be.Post("org-1", "drained", 100) }()
	<-started
	drain, cancel := context.WithCancel(context.Background())
	cancel() // the drain is over at once: the running attempt is cancelled
	if err := be.Hook.Shutdown(drain); err == nil {
		t.Fatal("Shutdown cancelled an attempt and returned no error")
	}
	if r := <-answered; r.Outcome("createShipment") != idemcode.OutcomeReleased {
		t.Fatalf("the drained attempt: %s", r.Body)
	}
	be.Resolver.Hook = nil
	if r := be.Post("org-1", "late", 100); r.Code() != "IDEMPOTENCY_UNAVAILABLE" {
		t.Fatalf("an attempt after Shutdown: %s", r.Body)
	}
	idemtest.RequireState(t, be.Client.IdempotencyBackend(), "org-1", "drained", idemtest.Pending)
}
