package testapp_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// A hand-written atomic mutation whose resolver needs the database
// (createShipmentOptIn creates a shipment, its records IdempotencyRecords) is tried as a claim born
// completed at most once per process: the try finds that the resolver
// needs statements, and from then on its claims take the atomic path, the
// resolver run once a request. The refused statement of the try is not
// an error of the server's: nothing is logged as one.
func TestAResolverThatNeedsStatementsRunsOnceARequest(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		var logs lockedBuffer
		be := testapp.NewBench(t, b, idem.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		var runs atomic.Int32
		be.Resolver.Hook = func(context.Context, *ent.Shipment) error { runs.Add(1); return nil }
		for i := range 3 {
			before := runs.Load()
			res := be.GQL("org-1", `mutation($k: String!) { createShipmentOptIn(idempotencyKey: $k, input: {destination: "Oslo", weightGrams: 5}) { id destination } }`,
				map[string]any{"k": fmt.Sprint("opt-in-", i)})
			if len(res.Errors) > 0 || res.Outcome("createShipmentOptIn") != idemcode.OutcomeExecuted {
				t.Fatalf("create %d: %s", i, res.Body)
			}
			// The first may have been tried born completed (PostgreSQL,
			// SQLite): twice; never again after it.
			if n := runs.Load() - before; n != 1 && (i > 0 || n != 2) {
				t.Fatalf("create %d ran the resolver %d times", i, n)
			}
		}
		if l := logs.String(); strings.Contains(l, "level=ERROR") || strings.Count(l, "cannot be one statement") > 1 {
			t.Fatalf("the server's log:\n%s", l)
		}
	})
}
