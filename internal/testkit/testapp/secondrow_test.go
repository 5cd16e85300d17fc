package testapp_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// lockedBuffer is a log destination the hook and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A resolver that creates a row of its record entity besides the one the
// claim inserted (an application's createX that kept its old body,
// r.client.X.Create().SetInput(input).Save(ctx), behind a helper the
// generator cannot see) is refused: the extra create never reaches the
// database, through the server's client (outside the attempt's
// transaction, where SQLite would wait on its own writer lock) or the
// attempt's; the client gets INTERNAL_SERVER_ERROR saying so, the key is
// released, and the log names the resolver. Never two rows: once the
// resolver is fixed, the same key runs and leaves one row.
func TestResolverCreatingASecondRowIsRefused(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		var logs lockedBuffer
		be := testapp.NewBench(t, b, idem.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		for i, c := range []struct {
			field, resolver string
			client          func(ctx context.Context) *ent.Client
		}{
			{"createShipmentLease", "mutationResolver.CreateShipmentLease", func(context.Context) *ent.Client { return be.Client }},
			{"createShipmentLease", "mutationResolver.CreateShipmentLease", ent.FromContext},
			{"createShipmentAtomic", "mutationResolver.CreateShipmentAtomic", func(context.Context) *ent.Client { return be.Client }},
			{"createShipmentAtomic", "mutationResolver.CreateShipmentAtomic", ent.FromContext},
		} {
			key := fmt.Sprintf("%s-%d", c.field, i)
			be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
				_, err := c.client(ctx).Shipment.Create().
					SetInput(ent.CreateShipmentInput{Destination: "Lyon", WeightGrams: 700}).
					SetOrg("org-1").
					Save(ctx)
				return err
			}
			before := be.Count()
			q := `mutation($k: String!) { ` + c.field + `(idempotencyKey: $k, input: {destination: "Lyon", weightGrams: 700}) { id } }`
			res := be.GQL("org-1", q, map[string]any{"k": key})
			if res.Code() != string(idemcode.InternalServerError) || len(res.Errors) != 1 ||
				!strings.Contains(res.Errors[0].Message, "creates a second Shipment instead of using the claimed one") ||
				res.Outcome(c.field) == idemcode.OutcomeExecuted {
				t.Fatalf("%s: %s", c.field, res.Body)
			}
			if n := be.Count(); n > before+1 {
				t.Fatalf("%s: %d rows after the refusal, %d before", c.field, n, before)
			}
			if log := logs.String(); !strings.Contains(log, "resolver="+c.resolver) || !strings.Contains(log, "ent.ClaimedShipment(ctx)") {
				t.Fatalf("%s: log does not name the resolver and the fix:\n%s", c.field, log)
			}

			be.Resolver.Hook = nil
			fixed := be.GQL("org-1", q, map[string]any{"k": key})
			if len(fixed.Errors) > 0 || fixed.Replayed {
				t.Fatalf("%s after the fix: %s", c.field, fixed.Body)
			}
			if n := be.Count(); n != before+1 {
				t.Fatalf("%s: %d rows for one key, want %d", c.field, n, before+1)
			}
		}
	})
}
