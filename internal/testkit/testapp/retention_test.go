package testapp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	"github.com/goovo/idem/internal/testkit/testapp/ent/idempotencyarchive"
	"github.com/goovo/idem/internal/testkit/testapp/ent/shipment"
)

// admin is an Admin over the bench's database, with its clock.
func admin(t testing.TB, be *testapp.Bench) *idemctl.Admin {
	t.Helper()
	hook, err := idem.New(idem.Config{Backend: be.Client.IdempotencyBackend(), Clock: be.Clock})
	if err != nil {
		t.Fatal(err)
	}
	a := idemctl.New(hook)
	return a
}

// A record replays until its retention window ends, answers
// IDEMPOTENCY_KEY_EXPIRED after it (before and after the sweeper archived
// it), and never runs again.
func TestRecordExpiresAndIsArchived(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		var calls atomic.Int32
		be.Resolver.Hook = func(context.Context, *ent.Shipment) error { calls.Add(1); return nil }
		first := be.Post("org-1", "old", 100)
		if len(first.Errors) > 0 {
			t.Fatalf("first: %s", first.Body)
		}

		be.Clock.Advance(idem.DefaultRetention - time.Minute)
		if r := be.Post("org-1", "old", 100); !r.Replayed || !bytes.Equal(r.Data, first.Data) {
			t.Fatalf("inside the window: %s", r.Body)
		}
		be.Clock.Advance(2 * time.Minute)
		if r := be.Post("org-1", "old", 100); r.Code() != string(idemcode.KeyExpired) || r.Errors[0].Extensions["idempotencyKey"] != "old" {
			t.Fatalf("past the window, not yet swept: %s", r.Body)
		}

		report, err := admin(t, be).Sweep(context.Background(), idemctl.SweepOptions{})
		if err != nil || report.Archived() != 1 || report.Purged() != 0 {
			t.Fatalf("sweep: %+v %v", report, err)
		}
		ctx := idemschema.IncludeUnfinished(context.Background())
		rec := be.Record("org-1", "old")
		if (rec.IdempotencyResponse != nil && len(*rec.IdempotencyResponse) > 0) || rec.IdempotencyArchivedAt == nil || *rec.IdempotencyStatus != shipment.IdempotencyStatusSucceeded {
			t.Fatalf("tombstone: %+v", rec)
		}
		archived, err := be.Client.IdempotencyArchive.Query().Where(idempotencyarchive.IdempotencyKey("old")).Only(ctx)
		if err != nil || archived.RecordTable != shipment.Table || archived.TenantID != "org-1" || !bytes.Contains(archived.IdempotencyResponse, []byte(`"destination":"Lyon","weightGrams":100,"label":"attempt-1"`)) {
			t.Fatalf("archive: %+v %v", archived, err)
		}
		if r := be.Post("org-1", "old", 100); r.Code() != string(idemcode.KeyExpired) {
			t.Fatalf("after the sweep: %s", r.Body)
		}
		if again, err := admin(t, be).Sweep(context.Background(), idemctl.SweepOptions{}); err != nil || again.Archived() != 0 {
			t.Fatalf("a second sweep archived again: %+v %v", again, err)
		}
		if calls.Load() != 1 {
			t.Fatalf("resolver ran %d times", calls.Load())
		}
		// The business row itself stays: only the response moved.
		if n, _ := be.Client.Shipment.Query().Count(context.Background()); n != 1 {
			t.Fatalf("%d shipments visible, want 1", n)
		}
	})
}

// Past the tombstone horizon the key is forgotten: a record-only row is
// deleted, a business row keeps its data without its key, and a request with
// the key runs as a new intent.
func TestTombstonesArePurgedAfterTheHorizon(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		created := be.Post("org-1", "ancient", 100)
		approve := be.GQL("org-1", `mutation($id: ID!) { approveShipment(idempotencyKey: "ancient-approval", id: $id) { id } }`,
			map[string]any{"id": shipmentID(t, created)})
		if len(approve.Errors) > 0 {
			t.Fatalf("approve: %s", approve.Body)
		}
		be.Clock.Advance(idem.DefaultRetention + time.Hour)
		if _, err := admin(t, be).Sweep(context.Background(), idemctl.SweepOptions{}); err != nil {
			t.Fatal(err)
		}
		dry, err := admin(t, be).Sweep(context.Background(), idemctl.SweepOptions{DryRun: true})
		if err != nil || dry.Purged() != 0 {
			t.Fatalf("dry run before the horizon: %+v %v", dry, err)
		}
		be.Clock.Advance(idem.DefaultTombstoneHorizon)
		dry, err = admin(t, be).Sweep(context.Background(), idemctl.SweepOptions{DryRun: true})
		if err != nil || dry.Purged() != 2 {
			t.Fatalf("dry run past the horizon: %+v %v", dry, err)
		}
		report, err := admin(t, be).Sweep(context.Background(), idemctl.SweepOptions{})
		if err != nil || report.Purged() != 2 {
			t.Fatalf("purge: %+v %v", report, err)
		}
		ctx := idemschema.IncludeUnfinished(context.Background())
		if n, _ := be.Client.IdempotencyRecord.Query().Count(ctx); n != 0 {
			t.Fatalf("%d general records left", n)
		}
		s, err := be.Client.Shipment.Query().Only(ctx)
		if err != nil || s.IdempotencyKey != nil || s.IdempotencyStatus != nil || s.Destination != "Lyon" {
			t.Fatalf("business row after the purge: %+v %v", s, err)
		}
		if r := be.Post("org-1", "ancient", 100); len(r.Errors) > 0 || r.Replayed {
			t.Fatalf("a forgotten key runs as new: %s", r.Body)
		}
		archived, _ := be.Client.IdempotencyArchive.Query().Count(ctx)
		if archived != 2 {
			t.Fatalf("the archive lost rows: %d", archived)
		}
	})
}

func shipmentID(t *testing.T, r *testkit.Response) string {
	t.Helper()
	var d struct{ CreateShipment struct{ ID string } }
	if err := json.Unmarshal(r.Data, &d); err != nil || d.CreateShipment.ID == "" {
		t.Fatalf("no shipment: %s", r.Body)
	}
	return d.CreateShipment.ID
}

// A sweep interrupted while a batch is under way lets that batch finish and
// counts it: cancelled half-way, its COMMIT might land without the sweeper
// hearing of it, and the report would miss what it moved. PostgreSQL only:
// the batch is held up by a lock on the archive table, which SQLite's one
// write lock cannot single out.
func TestInterruptedSweepFinishesItsBatch(t *testing.T) {
	for _, b := range []idemtest.Kind{idemtest.Postgres, idemtest.PostgresPartitioned} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			be := testapp.NewBench(t, b, idem.Config{})
			for _, k := range []string{"a", "b", "c"} {
				if r := be.Post("org-1", k, 100); len(r.Errors) > 0 {
					t.Fatal(string(r.Body))
				}
			}
			be.Clock.Advance(idem.DefaultRetention + time.Minute)
			db := be.DB.Driver.DB()
			bg := context.Background()
			hold, err := db.BeginTx(bg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer hold.Rollback()

			// Once the first shipment is archived, the archive table is
			// locked: the next batch waits for it.
			var locked sync.Once
			lockErr := make(chan error, 1)
			progress := func(p idemctl.SweepProgress) {
				if p.Entity == "Shipment" && p.Archived == 1 {
					locked.Do(func() {
						_, err := hold.ExecContext(bg, `LOCK TABLE idempotency_archives IN EXCLUSIVE MODE`)
						lockErr <- err
					})
				}
			}
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			type result struct {
				report idemctl.SweepReport
				err    error
			}
			done := make(chan result, 1)
			go func() {
				r, err := admin(t, be).Sweep(ctx, idemctl.SweepOptions{BatchSize: 1, Progress: progress})
				done <- result{r, err}
			}()
			select {
			case err := <-lockErr:
				if err != nil {
					t.Fatal(err)
				}
			case r := <-done:
				t.Fatalf("the sweep ended before its first batch: %+v, %v", r.report, r.err)
			}
			testkit.Eventually(t, func() bool {
				var waiting int
				if err := db.QueryRowContext(bg, `SELECT count(*) FROM pg_locks WHERE relation = 'idempotency_archives'::regclass AND NOT granted`).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
				return waiting > 0
			}, "the second batch waiting for the archive table")
			cancel() // ^C during the second batch
			if err := hold.Commit(); err != nil {
				t.Fatal(err)
			}
			res := <-done
			if !errors.Is(res.err, context.Canceled) {
				t.Fatalf("interrupted sweep returned %v", res.err)
			}
			archived, err := be.Client.IdempotencyArchive.Query().Count(bg)
			if err != nil {
				t.Fatal(err)
			}
			if archived != 2 || res.report.Archived() != 2 {
				t.Fatalf("%d archived, the report says %d (%+v); want 2 and 2: the batch under way finished and was counted, no other began", archived, res.report.Archived(), res.report)
			}
		})
	}
}
