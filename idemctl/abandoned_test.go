package idemctl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// A claim abandoned in pending (its worker died, its client never retried)
// does not stay for ever: past the tombstone horizon, counted from the
// claim's lease, the key is forgotten like any other. The pending row (a
// claim, never a business fact: the interceptor hides it) is deleted; a
// request with the key would run as new, which it would do anyway by taking
// the claim over.
func TestAbandonedClaimIsForgottenPastTheHorizon(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := newBench(t, b)
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			return errors.New("connection reset") // the attempt dies: the claim stays pending
		}
		if r := be.Post("org-1", "abandoned", 100); len(r.Errors) == 0 {
			t.Fatalf("the attempt should fail: %s", r.Body)
		}
		be.Clock.Advance(idem.DefaultTombstoneHorizon + 24*time.Hour)
		var doc sweepDoc
		be.run("-json", "sweep").ok(t).json(t, &doc)
		var st statsDoc
		be.run("-json", "stats").ok(t).json(t, &st)
		if p, _, _, _ := st.of("Shipment"); p != 0 || doc.Purged != 1 {
			t.Errorf("a claim abandoned %v ago is still there: %d pending after a sweep that purged %d", idem.DefaultTombstoneHorizon+24*time.Hour, p, doc.Purged)
		}
	})
}
