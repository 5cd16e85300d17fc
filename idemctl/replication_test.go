package idemctl_test

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/pgcluster"
	"github.com/goovo/idem/internal/testkit/testapp"
)

// The operator is told when a failover can lose acknowledged answers: a
// PostgreSQL without a synchronous standby (the shared test server) is
// reported, once, at level Warn, and by idemctl stats; a primary with a
// synchronous standby is reported as keeping the promise; SQLite says
// nothing.
func TestReplication(t *testing.T) {
	ctx := context.Background()
	t.Run("postgres without a standby", func(t *testing.T) {
		var logs bytes.Buffer
		be := &bench{Bench: testappBench(t, idemtest.Postgres, &logs), t: t}
		admin := idemctl.New(be.Hook)
		admin.ReportReplication(ctx)
		admin.ReportReplication(ctx)
		if n := strings.Count(logs.String(), "does not keep the idempotency promise"); n != 1 || !strings.Contains(logs.String(), "level=WARN") ||
			!strings.Contains(logs.String(), "no synchronous standby") || !strings.Contains(logs.String(), "answers differently") {
			t.Fatalf("want one warning saying what a failover loses:\n%s", logs.String())
		}
		var doc statsDoc
		be.run("-json", "stats").ok(t).json(t, &doc)
		if r := doc.Replication; r == nil || r.Synchronous || r.SynchronousCommit != "on" || r.SynchronousStandbyNames != "" || r.Warning == "" {
			t.Fatalf("stats' replication: %+v", doc.Replication)
		}
		if text := be.run("stats").ok(t).stdout; !strings.Contains(text, "Replication: NOT synchronous: no synchronous standby") {
			t.Fatalf("stats does not warn:\n%s", text)
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		var logs bytes.Buffer
		be := &bench{Bench: testappBench(t, idemtest.SQLite, &logs), t: t}
		idemctl.New(be.Hook).ReportReplication(ctx)
		if strings.Contains(logs.String(), "replication") {
			t.Fatalf("SQLite: %s", logs.String())
		}
		var doc statsDoc
		be.run("-json", "stats").ok(t).json(t, &doc)
		if doc.Replication != nil || strings.Contains(be.run("stats").ok(t).stdout, "Replication") {
			t.Fatalf("SQLite has replication: %+v", doc.Replication)
		}
	})
	t.Run("synchronous standby", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		pair, err := pgcluster.NewPair(ctx, pgcluster.Synchronous, pgcluster.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := pair.Remove(); err != nil {
				t.Error(err)
			}
		})
		db, err := sql.Open("pgx", pair.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		r, err := idemctl.CheckReplication(ctx, db, dialect.Postgres)
		if err != nil || !r.Synchronous || r.SynchronousStandbys != 1 || r.Standbys != 1 || r.Warning != "" {
			t.Fatalf("a synchronous standby: %+v, %v", r, err)
		}
		// A session that lowers synchronous_commit is told too.
		async, err := sql.Open("pgx", pair.URL("postgres")+"&synchronous_commit=local")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { async.Close() })
		r, err = idemctl.CheckReplication(ctx, async, dialect.Postgres)
		if err != nil || r.Synchronous || !strings.Contains(r.Warning, "synchronous_commit is local, below on") {
			t.Fatalf("synchronous_commit local: %+v, %v", r, err)
		}
	})
}

// testappBench is newBench with a logger writing to logs.
func testappBench(t *testing.T, b idemtest.Kind, logs *bytes.Buffer) *testapp.Bench {
	return testapp.NewBench(t, b, idem.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
}
