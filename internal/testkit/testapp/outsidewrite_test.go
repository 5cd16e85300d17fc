package testapp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// A resolver of an idempotent mutation that writes outside the claim's
// transaction, through the server's client (r.Client.X.Create()…Save(ctx))
// or through a transaction of its own (r.Client.Tx(ctx) … Commit()), has
// its write refused: it never reaches the database, whatever the resolver
// does with the error (here it ignores it and commits), and the whole
// mutation is refused (INTERNAL_SERVER_ERROR, the attempt rolled back, the
// key released), with a log that names the resolver and the fix. Such a
// write would commit whether or not the mutation does, and a retry would
// make it again: two rows for one key. Once the resolver is fixed, the
// same key runs and leaves one row.
func TestWriteOutsideTheClaimIsRefused(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		var logs lockedBuffer
		be := testapp.NewBench(t, b, idem.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		id := createShipment(t, be)
		// The resolver's own row: a shipment "Paris" (approveShipment's
		// records are IdempotencyRecords, so this is any other entity's row).
		extra := func(c *ent.Client, ctx context.Context) error {
			_, err := c.Shipment.Create().SetInput(ent.CreateShipmentInput{Destination: "Paris", WeightGrams: 1}).SetOrg("org-1").Save(ctx)
			return err
		}
		for _, c := range []struct {
			name  string
			write func(ctx context.Context) error
		}{
			{"client", func(ctx context.Context) error { return extra(be.Client, ctx) }},
			{"client-update", func(ctx context.Context) error {
				return be.Client.Shipment.UpdateOneID(uuid.MustParse(id)).SetLabel("outside").Exec(ctx)
			}},
			{"own-tx", func(ctx context.Context) error {
				tx, err := be.Client.Tx(ctx)
				if err != nil {
					return err
				}
				werr := extra(tx.Client(), ctx)
				if err := tx.Commit(); err != nil {
					return err
				}
				return werr
			}},
		} {
			key := "outside-" + c.name
			var seen error
			be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
				seen = c.write(ctx)
				return nil // whatever the resolver does with the error
			}
			before, label := paris(t, be), be.Record("org-1", "ship").Label
			res := approve(be, key, id)
			if res.Code() != string(idemcode.InternalServerError) || len(res.Errors) != 1 ||
				!strings.Contains(res.Errors[0].Message, "writes outside the mutation's transaction") ||
				res.Outcome("approveShipment") == idemcode.OutcomeExecuted {
				t.Fatalf("%s: %s", c.name, res.Body)
			}
			if !errors.Is(seen, idem.ErrWriteOutsideClaim) || !strings.Contains(seen.Error(), "mutationResolver.ApproveShipment") {
				t.Fatalf("%s: the resolver got %v", c.name, seen)
			}
			if n := paris(t, be); n != before {
				t.Fatalf("%s: %d rows of the resolver's own after the refusal, %d before", c.name, n, before)
			}
			if s := be.Record("org-1", "ship"); s.Label != label {
				t.Fatalf("%s: the shipment was changed: %q", c.name, s.Label)
			}
			if log := logs.String(); !strings.Contains(log, "resolver=mutationResolver.ApproveShipment") || !strings.Contains(log, "ent.FromContext(ctx)") {
				t.Fatalf("%s: log does not name the resolver and the fix:\n%s", c.name, log)
			}

			// Fixed: the same key runs, through the attempt's client.
			be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error { return extra(ent.FromContext(ctx), ctx) }
			if fixed := approve(be, key, id); len(fixed.Errors) > 0 || fixed.Replayed {
				t.Fatalf("%s after the fix: %s", c.name, fixed.Body)
			}
			if n := paris(t, be); n != before+1 {
				t.Fatalf("%s: %d rows of the resolver's own for one key, want %d", c.name, n, before+1)
			}
		}
	})
}

// Reads stay free inside an idempotent mutation: through the server's
// client, and (on PostgreSQL) in a transaction of the resolver's own; and,
// on PostgreSQL, a write made with idem.CommitsAlone(ctx) commits on its
// own, as its name says, even when the mutation then fails. (On SQLite the
// mutation's transaction holds the one writer's turn until it ends: a write
// of its own, allowed or not, could only wait for it.)
func TestReadsAndCommitsAloneAreLetThrough(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		id := createShipment(t, be)
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			if n, err := be.Client.Shipment.Query().Count(ctx); err != nil || n == 0 {
				return fmt.Errorf("read through the client: %d, %w", n, err)
			}
			if b.IsPostgres() {
				tx, err := be.Client.Tx(ctx)
				if err != nil {
					return err
				}
				if _, err := tx.Shipment.Get(ctx, uuid.MustParse(id)); err != nil {
					_ = tx.Rollback()
					return err
				}
				if err := tx.Commit(); err != nil {
					return err
				}
			}
			if !b.IsPostgres() {
				return idem.Final(errors.New("refused by the business rule"))
			}
			_, err := be.Client.Shipment.Create().SetInput(ent.CreateShipmentInput{Destination: "Paris", WeightGrams: 1}).
				SetOrg("org-1").Save(idem.CommitsAlone(ctx))
			if err != nil {
				return err
			}
			return idem.Final(errors.New("refused by the business rule"))
		}
		res := approve(be, "alone", id)
		if len(res.Errors) != 1 || res.Errors[0].Message != "refused by the business rule" {
			t.Fatalf("%s", res.Body)
		}
		if n := paris(t, be); b.IsPostgres() && n != 1 {
			t.Fatalf("%d rows written with CommitsAlone, want 1 (it commits on its own)", n)
		}
	})
}

func createShipment(t *testing.T, be *testapp.Bench) string {
	t.Helper()
	var created struct{ CreateShipment struct{ ID string } }
	if err := json.Unmarshal(be.Post("org-1", "ship", 1000).Data, &created); err != nil || created.CreateShipment.ID == "" {
		t.Fatalf("create: %v", err)
	}
	return created.CreateShipment.ID
}

func approve(be *testapp.Bench, key, id string) *testkit.Response {
	return be.GQL("org-1", `mutation($k: String!, $id: ID!) { approveShipment(idempotencyKey: $k, id: $id) { id label } }`,
		map[string]any{"k": key, "id": id})
}

// paris counts the shipments the resolvers under test write of their own.
func paris(t *testing.T, be *testapp.Bench) int {
	t.Helper()
	n := 0
	for _, s := range be.Client.Shipment.Query().AllX(context.Background()) {
		if s.Destination == "Paris" {
			n++
		}
	}
	return n
}
