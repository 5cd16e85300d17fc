package idem_test

import (
	"context"
	"strings"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
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

// A request whose client goes away mid-mutation is rolled back and its
// claim released, and the log says so without a spurious "rollback
// failed": database/sql has rolled the transaction back already.
func TestCancelledRequestIsReleasedQuietly(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, b idemtest.Kind) {
		be, logs := loggedBench(t, b, idem.Config{})
		started := make(chan struct{})
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = sendContext(ctx, be, "org-1", "gone")
		}()
		<-started
		cancel()
		<-done
		testkit.Eventually(t, func() bool { return strings.Contains(logs.String(), "claim released") }, "the claim released")
		if strings.Contains(logs.String(), "rollback failed") {
			t.Fatalf("log:\n%s", logs)
		}
		be.Resolver.Hook = nil
		if r := be.Post("org-1", "gone", 100); len(r.Errors) > 0 || r.Outcome("createShipment") != idemcode.OutcomeExecuted {
			t.Fatalf("retry after the cancelled request: %s", r.Body)
		}
	})
}
