package testapp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	"github.com/goovo/idem/internal/testkit/testapp/ent/idempotencyrecord"
	"github.com/goovo/idem/internal/testkit/testapp/ent/shipment"
)

// The generator is general: another entity, with UUID ids and its own
// tenant field as the scope, gets the same behaviour.
func TestGeneratedMutationOnAnotherEntity(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		first := be.Post("org-1", "ship-1", 1500)
		second := be.Post("org-1", "ship-1", 1500)
		if len(first.Errors) > 0 || first.Replayed || !bytes.Equal(first.Data, second.Data) || !second.Replayed {
			t.Fatalf("replay:\n%s\n%s", first.Body, second.Body)
		}
		other := be.Post("org-2", "ship-1", 1500)
		if len(other.Errors) > 0 || other.Replayed || bytes.Equal(other.Data, first.Data) {
			t.Fatalf("another org with the same key: %s", other.Body)
		}
		if r := be.Post("org-1", "ship-1", 2000); r.Code() != string(idemcode.KeyReused) {
			t.Fatalf("reused key: %s", r.Body)
		}
		// The entity's own validator rejects the input at the claim:
		// nothing is stored, the answer says why.
		if r := be.Post("org-1", "ship-2", 0); r.Code() != string(idemcode.BadUserInput) || !strings.Contains(r.Errors[0].Message, "weight_grams") {
			t.Fatalf("invalid weight: %s", r.Body)
		}
		if n := be.Count(); n != 2 {
			t.Fatalf("%d shipments, want 2", n)
		}
		if rec := be.Record("org-2", "ship-1"); rec.Org != "org-2" {
			t.Fatalf("scope field not set from the context: %+v", rec)
		}
		// The schema's own lease (10s), not the hook's default (30s), read
		// while the claim is pending: once finished, the record's
		// lease_expires_at holds the expiry its answer promised.
		var pending *ent.Shipment
		be.Resolver.Hook = func(context.Context, *ent.Shipment) error {
			pending = be.Record("org-1", "ship-3")
			return nil
		}
		if r := be.Post("org-1", "ship-3", 1500); len(r.Errors) > 0 {
			t.Fatalf("ship-3: %s", r.Body)
		}
		be.Resolver.Hook = nil
		if got := pending.IdempotencyLeaseExpiresAt.Sub(*pending.IdempotencyClaimedAt); got != 10*time.Second {
			t.Fatalf("lease %v, want the schema's 10s", got)
		}
	})
}

// A claim whose worker died is taken over once its lease runs out, by the
// next request with the key, as attempt 2; before that, retries are told to
// come back, never later than when the lease ends.
func TestExpiredClaimIsTakenOver(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		// Make a claim with the request's fingerprint: a first attempt fails
		// (and releases the claim), then the record is put back as a worker
		// that died mid-run leaves it: pending, its lease still live. (The
		// crash of a real process is tested in cmd/server.)
		crashed := true
		be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
			if crashed {
				crashed = false
				return errors.New("connection reset")
			}
			return nil
		}
		_ = be.Post("org-1", "k", 100)
		rec := be.Record("org-1", "k")
		if *rec.IdempotencyStatus != shipment.IdempotencyStatusPending {
			t.Fatalf("status %s", *rec.IdempotencyStatus)
		}
		// A minute of lease left: no busy machine outlasts it before the
		// next request.
		now := time.Now()
		if err := rec.Update().SetIdempotencyLeaseExpiresAt(now.Add(time.Minute)).Exec(context.Background()); err != nil {
			t.Fatal(err)
		}

		busy := be.Post("org-1", "k", 100)
		if busy.Code() != string(idemcode.InProgress) {
			t.Fatalf("live lease: %s", busy.Body)
		}
		if ra := busy.Errors[0].Extensions["retryAfterSeconds"].(float64); ra < 1 || ra > 60 {
			t.Fatalf("retryAfterSeconds = %v, want between 1 and the lease left (60)", ra)
		}
		be.Clock.Advance(61 * time.Second)
		done := be.Post("org-1", "k", 100)
		if len(done.Errors) > 0 || !strings.Contains(string(done.Data), `"label":"attempt-2"`) {
			t.Fatalf("takeover: %s", done.Body)
		}
		if got := be.Record("org-1", "k"); got.IdempotencyAttempt != 2 || *got.IdempotencyStatus != shipment.IdempotencyStatusSucceeded {
			t.Fatalf("record after takeover: attempt %d status %s", got.IdempotencyAttempt, *got.IdempotencyStatus)
		}
	})
}

// The takeover race: the original worker wakes after its lease was taken
// over and tries to complete. Its writes are rolled back, its client gets
// the new attempt's result, and so does every later retry. PostgreSQL only:
// on SQLite a live worker holds the database's write lock for its whole
// transaction, so it cannot be taken over while it runs (only once it dies).
func TestWorkerThatLostItsLeaseCannotComplete(t *testing.T) {
	be := testapp.NewBench(t, idemtest.Postgres, idem.Config{})
	woke := make(chan struct{})
	var once sync.Once
	wake := func() { once.Do(func() { close(woke) }) }
	t.Cleanup(wake) // a failed test lets the worker end, or the server's Close waits for it
	blocked := make(chan struct{})
	be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
		if idem.ClaimFromContext(ctx).Attempt == 1 {
			close(blocked)
			<-woke
		}
		return nil
	}
	slow := make(chan *testkit.Response)
	go func() { slow <- be.Post("org-1", "race", 100) }()
	<-blocked

	be.Clock.Advance(11 * time.Second) // past the 10s lease
	winner := be.Post("org-1", "race", 100)
	if len(winner.Errors) > 0 || !strings.Contains(string(winner.Data), `"label":"attempt-2"`) {
		t.Fatalf("takeover: %s", winner.Body)
	}
	wake()
	loser := <-slow
	if !bytes.Equal(loser.Data, winner.Data) {
		t.Fatalf("the worker that lost its lease answered with its own result:\nloser:  %s\nwinner: %s", loser.Body, winner.Body)
	}
	if later := be.Post("org-1", "race", 100); !bytes.Equal(later.Data, winner.Data) || !later.Replayed {
		t.Fatalf("later retry: %s", later.Body)
	}
	rec := be.Record("org-1", "race")
	if rec.Label != "attempt-2" || rec.IdempotencyAttempt != 2 {
		t.Fatalf("the old worker's write survived: label %q attempt %d", rec.Label, rec.IdempotencyAttempt)
	}
}

// A retryable error (an unmarked one) rolls the attempt back and frees the
// key at once: the retry runs again, without waiting for the lease.
func TestRetryableErrorReleasesTheClaim(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		var calls atomic.Int32
		be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
			if calls.Add(1) == 1 {
				if _, err := s.Update().SetLabel("half-done").Save(ctx); err != nil {
					return err
				}
				return errors.New("downstream timeout")
			}
			return nil
		}
		first := be.Post("org-1", "k", 100)
		if len(first.Errors) == 0 || first.Replayed || string(first.Data) != "null" || first.Outcome("createShipment") != idemcode.OutcomeReleased {
			t.Fatalf("first: %s", first.Body)
		}
		if rec := be.Record("org-1", "k"); rec.Label != "" {
			t.Fatalf("failed attempt's write survived: %q", rec.Label)
		}
		second := be.Post("org-1", "k", 100)
		if len(second.Errors) > 0 || second.Replayed || !strings.Contains(string(second.Data), `"label":"attempt-2"`) {
			t.Fatalf("retry did not run again: %s", second.Body)
		}
	})
}

// A release that cannot get through at once is retried in the background:
// the key is free again as soon as the obstacle goes, not only when the
// lease runs out. Here a trigger makes every release fail until the test
// lifts it, and the lease is an hour, so that only the release can free
// the key; in production the obstacle is a broken connection, or, on
// SQLite, writers holding the database's lock past the busy timeout.
func TestReleaseIsRetriedUntilItGetsThrough(t *testing.T) {
	be := testapp.NewBench(t, idemtest.Postgres, idem.Config{Lease: time.Hour})
	created := be.Post("org-1", "ship", 100)
	db := be.DB.Driver.DB()
	ctx := context.Background()
	for _, stmt := range []string{
		`CREATE TABLE releases_blocked (one int)`,
		`INSERT INTO releases_blocked VALUES (1)`,
		// A release moves a pending claim's lease and nothing else.
		`CREATE FUNCTION block_releases() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF EXISTS (SELECT FROM releases_blocked) AND NEW.idempotency_status = 'pending'
				AND NEW.idempotency_attempt = OLD.idempotency_attempt
				AND NEW.idempotency_lease_expires_at < OLD.idempotency_lease_expires_at THEN
				RAISE EXCEPTION 'release blocked by the test';
			END IF;
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER block_releases BEFORE UPDATE ON idempotency_records FOR EACH ROW EXECUTE FUNCTION block_releases()`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	var calls atomic.Int32
	be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
		if calls.Add(1) == 1 {
			return errors.New("downstream timeout") // retryable: the claim is to be released
		}
		return nil
	}
	approve := func() *testkit.Response {
		return be.GQL("org-1", `mutation($id: ID!) { approveShipment(idempotencyKey: "k", id: $id) { id label } }`,
			map[string]any{"id": shipmentID(t, created)})
	}
	if first := approve(); first.Outcome("approveShipment") != idemcode.OutcomeReleased {
		t.Fatalf("first: %s", first.Body)
	}
	if blocked := approve(); blocked.Code() != string(idemcode.InProgress) {
		t.Fatalf("the release went through although it was blocked: %s", blocked.Body)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM releases_blocked`); err != nil {
		t.Fatal(err)
	}
	var res *testkit.Response
	testkit.Eventually(t, func() bool {
		res = approve()
		return res.Code() != string(idemcode.InProgress)
	}, "the key free again once the releases could go through")
	if len(res.Errors) > 0 || res.Outcome("approveShipment") != idemcode.OutcomeExecuted || calls.Load() != 2 {
		t.Fatalf("retry: %s (runs: %d)", res.Body, calls.Load())
	}
}

// A panic in a resolver is a retryable failure: the claim is released and
// the server keeps serving.
func TestPanicReleasesTheClaim(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		var calls atomic.Int32
		be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
			if calls.Add(1) == 1 {
				panic("resolver bug")
			}
			return nil
		}
		first := be.Post("org-1", "k", 100)
		if len(first.Errors) == 0 || string(first.Data) != "null" {
			t.Fatalf("panic: %s", first.Body)
		}
		second := be.Post("org-1", "k", 100)
		if len(second.Errors) > 0 || !strings.Contains(string(second.Data), `"label":"attempt-2"`) {
			t.Fatalf("retry after panic: %s", second.Body)
		}
		if other := be.Post("org-1", "other", 100); len(other.Errors) > 0 {
			t.Fatalf("server stopped serving: %s", other.Body)
		}
	})
}

// A final error keeps the record (failed) but none of the attempt's writes,
// and is replayed to every retry.
func TestFinalErrorKeepsTheRecordNotTheWrites(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		var calls atomic.Int32
		be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
			calls.Add(1)
			if _, err := s.Update().SetLabel("half-done").Save(ctx); err != nil {
				return err
			}
			return idem.Final(errors.New("destination not served"))
		}
		first := be.Post("org-1", "k", 100)
		second := be.Post("org-1", "k", 100)
		if len(first.Errors) != 1 || first.Errors[0].Message != "destination not served" || first.Replayed || first.Outcome("createShipment") != idemcode.OutcomeExecuted {
			t.Fatalf("first: %s", first.Body)
		}
		if !second.Replayed || !bytes.Equal(first.Data, second.Data) || len(second.Errors) != 1 || first.Errors[0].Message != second.Errors[0].Message {
			t.Fatalf("replay:\n%s\n%s", first.Body, second.Body)
		}
		if calls.Load() != 1 {
			t.Fatalf("resolver ran %d times", calls.Load())
		}
		rec := be.Record("org-1", "k")
		if *rec.IdempotencyStatus != shipment.IdempotencyStatusFailed || rec.Label != "" {
			t.Fatalf("record: status %s label %q", *rec.IdempotencyStatus, rec.Label)
		}
		// The failed record is not a business fact: queries do not see it.
		if n, _ := be.Client.Shipment.Query().Count(context.Background()); n != 0 {
			t.Fatalf("a failed claim is visible to queries (%d rows)", n)
		}
	})
}

// With WaitForInFlight, a duplicate that finds the key in progress waits
// for the result and replays it instead of answering IN_PROGRESS.
func TestDuplicateWaitsForTheResult(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		// Longer than a busy machine takes to run the first request.
		be := testapp.NewBench(t, b, idem.Config{WaitForInFlight: time.Minute})
		started := make(chan struct{})
		var once sync.Once
		be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
			once.Do(func() { close(started) })
			time.Sleep(300 * time.Millisecond)
			return nil
		}
		first := make(chan *testkit.Response)
		go func() { first <- be.Post("org-1", "k", 100) }()
		<-started
		dup := be.Post("org-1", "k", 100)
		orig := <-first
		if len(dup.Errors) > 0 || !dup.Replayed || !bytes.Equal(dup.Data, orig.Data) {
			t.Fatalf("duplicate did not wait and replay:\norig: %s\ndup:  %s", orig.Body, dup.Body)
		}
	})
}

// A hand-written mutation opts in with @idempotent alone: its records go to
// the ready-made IdempotencyRecord entity, the resolver runs once per key,
// and concurrent duplicates are told to wait.
func TestHandWrittenMutationWithTheGeneralRecord(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := testapp.NewBench(t, b, idem.Config{})
		created := be.Post("org-1", "ship", 100)
		var d struct{ CreateShipment struct{ ID string } }
		if err := json.Unmarshal(created.Data, &d); err != nil || d.CreateShipment.ID == "" {
			t.Fatalf("create: %s", created.Body)
		}
		var calls atomic.Int32
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			calls.Add(1)
			time.Sleep(20 * time.Millisecond)
			return nil
		}
		approve := func(key string) *testkit.Response {
			return be.GQL("org-1", `mutation($k: String!, $id: ID!) { approveShipment(idempotencyKey: $k, id: $id) { id label } }`,
				map[string]any{"k": key, "id": d.CreateShipment.ID})
		}
		results := make([]*testkit.Response, 10)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() { results[i] = approve("approve-1") })
		}
		wg.Wait()
		final := approve("approve-1")
		if len(final.Errors) > 0 || !final.Replayed || !strings.Contains(string(final.Data), `"label":"attempt-1+approved"`) {
			t.Fatalf("approve: %s", final.Body)
		}
		for i, r := range results {
			if !bytes.Equal(r.Data, final.Data) && r.Code() != string(idemcode.InProgress) {
				t.Fatalf("concurrent approval %d: %s", i, r.Body)
			}
		}
		if calls.Load() != 1 {
			t.Fatalf("resolver ran %d times", calls.Load())
		}
		n, err := be.Client.IdempotencyRecord.Query().Count(idemschema.IncludeUnfinished(context.Background()))
		if err != nil || n != 1 {
			t.Fatalf("%d records (%v), want 1", n, err)
		}
		// The argument is required by the schema (the test app does not
		// enable the header form).
		if r := be.GQL("org-1", `mutation($id: ID!) { approveShipment(id: $id) { id } }`, map[string]any{"id": d.CreateShipment.ID}); len(r.Errors) == 0 {
			t.Fatalf("approval without a key: %s", r.Body)
		}
	})
}

// A live attempt that runs longer than its lease renews it: a retry meanwhile
// is told the key is in progress, instead of taking the claim over and
// fencing the running attempt out (which, retried, would never finish).
// PostgreSQL only: on SQLite the running attempt holds the write lock, which
// a takeover needs too.
func TestLongRunningAttemptKeepsItsLease(t *testing.T) {
	for _, b := range []idemtest.Kind{idemtest.Postgres, idemtest.PostgresPartitioned} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			// Renewed every second, so that a renewal has two seconds of
			// slack before the lease runs out: more than a busy machine
			// delays it.
			const lease = 3 * time.Second
			be := testapp.NewBench(t, b, idem.Config{Lease: lease})
			created := be.Post("org-1", "ship", 100)
			var calls atomic.Int32
			started, finish := make(chan struct{}), make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { close(finish) }) }
			t.Cleanup(free) // a failed test lets the run end, or the server's Close waits for it
			be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
				if calls.Add(1) == 1 {
					close(started)
				}
				<-finish
				return nil
			}
			approve := func() *testkit.Response {
				return be.GQL("org-1", `mutation($id: ID!) { approveShipment(idempotencyKey: "slow", id: $id) { id label } }`,
					map[string]any{"id": shipmentID(t, created)})
			}
			first := make(chan *testkit.Response, 1)
			go func() { first <- approve() }()
			<-started
			// The retry comes once the lease the claim was made with has
			// run out by the database's clock, and the running attempt has
			// renewed it past that.
			ctx := idemschema.IncludeUnfinished(context.Background())
			rec, err := be.Client.IdempotencyRecord.Query().Where(idempotencyrecord.IdempotencyKey("slow")).Only(ctx)
			if err != nil {
				t.Fatal(err)
			}
			claimedUntil := *rec.IdempotencyLeaseExpiresAt
			testkit.Eventually(t, func() bool {
				var renewed bool
				err := be.DB.Driver.DB().QueryRowContext(ctx, `SELECT now() > $1 AND idempotency_lease_expires_at > now()
					FROM idempotency_records WHERE idempotency_key = 'slow'`, claimedUntil).Scan(&renewed)
				if err != nil {
					t.Fatal(err)
				}
				return renewed
			}, "the claim's lease (until %v) past, and renewed", claimedUntil)
			if r := approve(); r.Code() != string(idemcode.InProgress) {
				t.Fatalf("a retry during a long run: %s", r.Body)
			}
			free()
			if r := <-first; len(r.Errors) > 0 {
				t.Fatalf("the long run: %s", r.Body)
			}
			if calls.Load() != 1 {
				t.Fatalf("the mutation ran %d times", calls.Load())
			}
		})
	}
}
