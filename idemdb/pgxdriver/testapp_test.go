package pgxdriver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemdb/pgxdriver"
	"github.com/goovo/idem/idempartition"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	tent "github.com/goovo/idem/internal/testkit/testapp/ent"
	_ "github.com/goovo/idem/internal/testkit/testapp/ent/runtime"
	"github.com/goovo/idem/internal/testkit/testapp/ent/shipment"
)

// TestTestAppThroughTheDriver runs the test application's generated code
// (internal/testkit/testapp/ent: UUID keys, a scope column of its own, the general
// record entity, the archive) through the driver: the generated claim, the
// claimed row read through the transaction, and the operator's tools that
// run raw SQL in transactions (the sweeper, idempartition.ByTenant).
func TestTestAppThroughTheDriver(t *testing.T) {
	db := idemtest.Open(t, idemtest.Postgres)
	std := tent.NewClient(tent.Driver(db.Driver))
	testkit.Setup(t, db, std.IdempotencyBackend(), std.Schema.Create)
	drv, err := pgxdriver.Open(db.DSN + "&pool_max_conns=4")
	must(t, err)
	testkit.CloseInCleanup(t, "the pgx pool", func() { drv.Close() })
	c := tent.NewClient(tent.Driver(drv))
	ctx := context.Background()
	backend := c.IdempotencyBackend()

	// idempartition.ByTenant's dry run (of a schema with empty tables)
	// reads the catalog in a transaction (Tx.QueryContext).
	p, err := idempartition.ByTenant(ctx, backend, idempartition.Options{Partitions: 2, DryRun: true})
	must(t, err)
	if len(p.Tables) == 0 || len(p.Statements) == 0 {
		t.Errorf("partitioning dry run: %+v", p)
	}

	// The generated claim, in a transaction: inserted once, "taken" the
	// second time; the row it returns is updated through the transaction.
	recs, ok := backend.Records("Shipment")
	if !ok {
		t.Fatal("no Shipment records")
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	claim := &idembackend.Claim{Tenant: "org-1", Key: "k1", Fingerprint: "fp", Attempt: 1, Mode: "ATOMIC",
		ClaimedAt: now, LeaseExpiresAt: now.Add(time.Minute)}
	args := map[string]any{"input": tent.CreateShipmentInput{Destination: "Lyon", WeightGrams: 900}}
	txCtx, tx, err := backend.BeginTx(ctx)
	must(t, err)
	if inserted, err := recs.Insert(txCtx, tx, claim, args); err != nil || !inserted {
		t.Fatalf("claim: %v, %v", inserted, err)
	}
	claimed, ok := claim.Row().(*tent.Shipment)
	if !ok || claimed.ID == uuid.Nil || claimed.Destination != "Lyon" || claimed.CreatedAt.IsZero() {
		t.Errorf("claimed row: %+v", claimed)
	}
	label, err := tent.FromContext(txCtx).Shipment.UpdateOne(claimed).SetLabel("L-1").Save(txCtx)
	must(t, err)
	must(t, tx.Commit())
	if label.Label != "L-1" {
		t.Errorf("label %q", label.Label)
	}
	if inserted, err := recs.Insert(ctx, nil, claim, args); err != nil || inserted {
		t.Errorf("claim of a taken key: %v, %v; want false, nil", inserted, err)
	}

	// The sweeper archives a finished record past its retention (raw SQL in
	// transactions: Tx.ExecContext and Tx.QueryContext).
	_, err = c.Shipment.Create().SetOrg("org-1").SetDestination("Nice").SetWeightGrams(1).SetIdempotencyKey("old").
		SetIdempotencyStatus(shipment.IdempotencyStatusSucceeded).SetIdempotencyFingerprint("fp").SetIdempotencyAttempt(1).
		SetIdempotencyResponse([]byte(`{"data":{}}`)).SetIdempotencyClaimedAt(now.Add(-72 * time.Hour)).
		SetIdempotencyCompletedAt(now.Add(-48 * time.Hour)).Save(ctx)
	must(t, err)
	hook, err := idem.New(idem.Config{Backend: backend})
	must(t, err)
	report, err := idemctl.New(hook).Sweep(ctx, idemctl.SweepOptions{})
	must(t, err)
	archived := 0
	for _, ts := range report.Tables {
		archived += ts.Archived
	}
	if archived != 1 {
		t.Errorf("sweep archived %d records, want 1: %+v", archived, report)
	}

	// What ent reads through the driver is what it reads through
	// database/sql.
	read := func(c *tent.Client) []byte {
		all, err := c.Shipment.Query().Order(tent.Asc(shipment.FieldCreatedAt)).All(idemschema.IncludeUnfinished(ctx))
		must(t, err)
		recs, err := c.IdempotencyArchive.Query().All(ctx)
		must(t, err)
		b, err := json.Marshal([]any{all, recs})
		must(t, err)
		return b
	}
	if viaPgx, viaStd := read(c), read(std); !bytes.Equal(viaPgx, viaStd) {
		t.Errorf("ent reads differ:\npgx:          %s\ndatabase/sql: %s", viaPgx, viaStd)
	}
}
