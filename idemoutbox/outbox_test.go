package idemoutbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemoutbox"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// mailArgs is the job the tests enqueue.
type mailArgs struct {
	Shipment string `json:"shipment"`
}

func (mailArgs) Kind() string { return "test_mail" }

// bench is the test application with River's tables beside its own.
func bench(t *testing.T, b idemtest.Kind, databaseSQL bool) *testapp.Bench {
	t.Helper()
	var be *testapp.Bench
	if databaseSQL {
		be = testapp.NewBenchDatabaseSQL(t, b, idem.Config{})
	} else {
		be = testapp.NewBench(t, b, idem.Config{})
	}
	if err := idemoutbox.Migrate(context.Background(), be.DB.Driver.DB(), be.DB.Driver.Dialect()); err != nil {
		t.Fatal(err)
	}
	return be
}

// jobs returns the downstream keys of the test's jobs in River's table.
func jobs(t *testing.T, be *testapp.Bench) []string {
	t.Helper()
	rows, err := be.DB.Driver.DB().QueryContext(context.Background(), `SELECT `+metadata(be)+` FROM river_job WHERE kind = 'test_mail' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var meta []byte
		if err := rows.Scan(&meta); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, idemoutbox.DownstreamKey(&rivertype.JobRow{Metadata: meta}))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// metadata is the column of a job's metadata as JSON text (SQLite stores
// it as JSONB).
func metadata(be *testapp.Bench) string {
	if be.DB.Kind == idemtest.SQLite {
		return "json(metadata)"
	}
	return "metadata"
}

const createAtomic = `mutation($k: String!, $g: Int!) { createShipmentAtomic(idempotencyKey: $k, input: {destination: "Lyon", weightGrams: $g}) { id } }`

// post sends a shipment in lease mode (createShipment) or atomic mode.
func post(be *testapp.Bench, atomic bool, key string) *testkit.Response {
	if atomic {
		return be.GQL("org-1", createAtomic, map[string]any{"k": key, "g": 100})
	}
	return be.Post("org-1", key, 100)
}

// eachMode runs test on every backend, on pgx and database/sql where
// PostgreSQL has both, in lease and atomic mode.
func eachMode(t *testing.T, test func(t *testing.T, be *testapp.Bench, atomic bool)) {
	testkit.EachRiver(t, func(t *testing.T, b idemtest.Kind) {
		paths := []bool{false}
		if b == idemtest.Postgres {
			paths = append(paths, true)
		}
		for _, databaseSQL := range paths {
			for _, atomic := range []bool{false, true} {
				t.Run(fmt.Sprintf("database/sql=%v,atomic=%v", databaseSQL, atomic), func(t *testing.T) {
					test(t, bench(t, b, databaseSQL), atomic)
				})
			}
		}
	})
}

// A job enqueued by the attempt that stores the result exists once the
// result committed, once: a retry replays and enqueues nothing. Each job
// of the attempt has its own downstream key.
func TestJobCommitsWithTheResult(t *testing.T) {
	eachMode(t, func(t *testing.T, be *testapp.Bench, atomic bool) {
		var got []string
		be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
			for range 2 {
				res, err := idemoutbox.Enqueue(ctx, mailArgs{Shipment: s.ID.String()}, &river.InsertOpts{Metadata: []byte(`{"trace":"t-1"}`)})
				if err != nil {
					return err
				}
				got = append(got, idemoutbox.DownstreamKey(res.Job))
			}
			return nil
		}
		if r := post(be, atomic, "k"); len(r.Errors) > 0 {
			t.Fatalf("mutation: %s", r.Body)
		}
		if r := post(be, atomic, "k"); !r.Replayed {
			t.Fatalf("retry: %s", r.Body)
		}
		keys := jobs(t, be)
		if len(keys) != 2 || fmt.Sprint(keys) != fmt.Sprint(got) || keys[0] == keys[1] || keys[0] == "" {
			t.Fatalf("jobs with downstream keys %q, want the two the attempt enqueued (%q), distinct", keys, got)
		}
		var meta map[string]any
		row := be.DB.Driver.DB().QueryRowContext(context.Background(), `SELECT `+metadata(be)+` FROM river_job WHERE kind = 'test_mail' ORDER BY id LIMIT 1`)
		var raw []byte
		if err := row.Scan(&raw); err != nil || json.Unmarshal(raw, &meta) != nil || meta["trace"] != "t-1" {
			t.Fatalf("the job's metadata lost the caller's: %s (%v)", raw, err)
		}
	})
}

// An attempt rolled back, by a retryable error or by a final one (which
// keeps none of the resolver's writes), leaves no job; the retry that
// succeeds leaves one, with the downstream key the failed attempt had.
func TestRolledBackAttemptLeavesNoJob(t *testing.T) {
	eachMode(t, func(t *testing.T, be *testapp.Bench, atomic bool) {
		var (
			fail  error
			first string
		)
		be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
			res, err := idemoutbox.Enqueue(ctx, mailArgs{Shipment: s.ID.String()}, nil)
			if err != nil {
				return err
			}
			if first == "" {
				first = idemoutbox.DownstreamKey(res.Job)
			}
			return fail
		}
		fail = idem.Final(errors.New("refused"))
		if r := post(be, atomic, "final"); len(r.Errors) == 0 {
			t.Fatalf("final error: %s", r.Body)
		}
		fail = errors.New("connection reset")
		if r := post(be, atomic, "retryable"); len(r.Errors) == 0 {
			t.Fatalf("retryable error: %s", r.Body)
		}
		if keys := jobs(t, be); len(keys) != 0 {
			t.Fatalf("failed attempts left %d jobs", len(keys))
		}
		fail = nil
		if r := post(be, atomic, "retryable"); len(r.Errors) > 0 {
			t.Fatalf("retry: %s", r.Body)
		}
		if keys := jobs(t, be); len(keys) != 1 {
			t.Fatalf("%d jobs after the retry, want 1", len(keys))
		}
	})
}

// The takeover race: an attempt that enqueued its job and lost its claim
// to a takeover while it ran is fenced out at its completion, and its job
// with it; the attempt that took over commits one job, with the same
// downstream key. PostgreSQL only: on SQLite a live attempt holds the
// write lock, and only a dead one is taken over.
func TestAttemptThatLostItsClaimLeavesNoJob(t *testing.T) {
	for _, b := range []idemtest.Kind{idemtest.Postgres, idemtest.PostgresPartitioned} {
		for _, databaseSQL := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s,database/sql=%v", b, databaseSQL), func(t *testing.T) {
				t.Parallel()
				be := bench(t, b, databaseSQL)
				woke, blocked := make(chan struct{}), make(chan struct{})
				var once sync.Once
				wake := func() { once.Do(func() { close(woke) }) }
				t.Cleanup(wake)
				var (
					mu   sync.Mutex
					keys = map[int]string{}
				)
				be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
					res, err := idemoutbox.Enqueue(ctx, mailArgs{Shipment: s.ID.String()}, nil)
					if err != nil {
						return err
					}
					attempt := idem.ClaimFromContext(ctx).Attempt
					mu.Lock()
					keys[attempt] = idemoutbox.DownstreamKey(res.Job)
					mu.Unlock()
					if attempt == 1 {
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
				if len(winner.Errors) > 0 {
					t.Fatalf("takeover: %s", winner.Body)
				}
				wake()
				if loser := <-slow; !bytes.Equal(loser.Data, winner.Data) {
					t.Fatalf("the attempt that lost its claim answered %s, want the winner's %s", loser.Body, winner.Body)
				}
				got := jobs(t, be)
				mu.Lock()
				defer mu.Unlock()
				if len(got) != 1 || got[0] != keys[2] || keys[1] != keys[2] {
					t.Fatalf("jobs %q; attempts enqueued %v: want one job, whose downstream key both attempts share", got, keys)
				}
			})
		}
	}
}

// Outside an idempotent mutation's resolver there is no transaction for
// the job to follow.
func TestEnqueueNeedsAnAttempt(t *testing.T) {
	if _, err := idemoutbox.Enqueue(context.Background(), mailArgs{}, nil); !errors.Is(err, idemoutbox.ErrNoAttempt) {
		t.Fatalf("Enqueue outside an attempt: %v, want ErrNoAttempt", err)
	}
}

// Operators see the jobs that wait, and how old the oldest is.
func TestStatsCountWaitingJobs(t *testing.T) {
	testkit.EachRiver(t, func(t *testing.T, b idemtest.Kind) {
		be := bench(t, b, false)
		be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
			_, err := idemoutbox.Enqueue(ctx, mailArgs{Shipment: s.ID.String()}, nil)
			return err
		}
		for _, k := range []string{"a", "b", "c"} {
			if r := be.Post("org-1", k, 100); len(r.Errors) > 0 {
				t.Fatalf("mutation: %s", r.Body)
			}
		}
		be2 := be.Client.IdempotencyBackend()
		stats, err := idemoutbox.Stats(context.Background(), be2.DB(), be2.Dialect())
		if err != nil {
			t.Fatal(err)
		}
		if len(stats) != 1 || stats[0].Kind != "test_mail" || stats[0].Waiting != 3 || stats[0].Failed != 0 ||
			stats[0].OldestWaiting < 0 || stats[0].OldestWaiting > time.Hour {
			t.Fatalf("stats %+v, want 3 test_mail jobs waiting, the oldest inserted just now", stats)
		}
		// A job a worker runs is running, not waiting.
		if _, err := be2.DB().ExecContext(context.Background(), `UPDATE river_job SET state = 'running' WHERE id = (SELECT min(id) FROM river_job)`); err != nil {
			t.Fatal(err)
		}
		stats, err = idemoutbox.Stats(context.Background(), be2.DB(), be2.Dialect())
		if err != nil {
			t.Fatal(err)
		}
		if len(stats) != 1 || stats[0].Waiting != 2 || stats[0].Running != 1 {
			t.Fatalf("stats %+v, want 2 test_mail jobs waiting and 1 running", stats)
		}
	})
}

// On MariaDB the outbox is refused, at once and in its own words: River
// has no MySQL driver, and half an outbox (jobs that no worker runs)
// would lose effects.
func TestMySQLIsRefused(t *testing.T) {
	t.Parallel()
	be := testapp.NewBench(t, idemtest.MariaDB, idem.Config{})
	ctx := context.Background()
	db, d := be.DB.Driver.DB(), be.DB.Driver.Dialect()
	if err := idemoutbox.Migrate(ctx, db, d); !errors.Is(err, idemoutbox.ErrMySQL) {
		t.Fatalf("Migrate: %v", err)
	}
	if err := idemoutbox.Validate(ctx, db, d); !errors.Is(err, idemoutbox.ErrMySQL) {
		t.Fatalf("Validate: %v", err)
	}
	if _, err := idemoutbox.Stats(ctx, db, d); !errors.Is(err, idemoutbox.ErrMySQL) {
		t.Fatalf("Stats: %v", err)
	}
	var enqueued error
	be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
		_, enqueued = idemoutbox.Enqueue(ctx, mailArgs{Shipment: s.ID.String()}, nil)
		return enqueued
	}
	if r := be.Post("org-1", "mail", 100); len(r.Errors) == 0 || !errors.Is(enqueued, idemoutbox.ErrMySQL) {
		t.Fatalf("Enqueue: %v; answer %s", enqueued, r.Body)
	}
}
