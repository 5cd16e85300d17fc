package idemdb

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func openQueued(t *testing.T, path string) *sql.DB {
	t.Helper()
	name, source, _ := Resolve(path)
	db, err := sql.Open(name, source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS t (n INTEGER)"); err != nil {
		t.Fatal(err)
	}
	return db
}

// A writer that holds SQLite's write lock back to back, transaction after
// transaction, cannot starve another writer of the process: the other takes
// its turn after at most the transaction under way and one it had queued
// already. SQLite alone lets a writer poll for the lock (sleeping up to
// 100 ms between tries), and a hog that never leaves it free for that long
// wins every time.
func TestWritersTakeTurns(t *testing.T) {
	db := openQueued(t, filepath.Join(t.TempDir(), "turns.db"))
	ctx, stop := context.WithCancel(context.Background())
	var hogBegins atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			tx, err := db.BeginTx(context.Background(), nil)
			if err != nil {
				t.Errorf("hog: %v", err)
				return
			}
			hogBegins.Add(1)
			_, _ = tx.Exec("INSERT INTO t VALUES (1)")
			time.Sleep(20 * time.Millisecond)
			if err := tx.Commit(); err != nil {
				t.Errorf("hog: %v", err)
				return
			}
		}
	})
	defer func() { stop(); wg.Wait() }()
	for hogBegins.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	for i := range 10 {
		before := hogBegins.Load()
		if _, err := db.Exec("INSERT INTO t VALUES (2)"); err != nil {
			t.Fatalf("write %d behind the hog: %v", i, err)
		}
		if passed := hogBegins.Load() - before; passed > 3 {
			t.Fatalf("write %d waited for %d of the hog's transactions", i, passed)
		}
	}
}

// A writer waits in the queue no longer than its context; readers do not
// queue.
func TestQueueingIsForWritersAndBoundedByTheContext(t *testing.T) {
	db := openQueued(t, filepath.Join(t.TempDir(), "bounded.db"))
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatalf("a read behind a write transaction: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (3)"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a write behind a write transaction, with 50 ms to wait: %v", err)
	}
	if _, err := db.BeginTx(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a transaction behind a write transaction, its context over: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO t VALUES (3)"); err != nil {
		t.Fatalf("after the commit: %v", err)
	}
}

func TestWrites(t *testing.T) {
	for q, want := range map[string]bool{
		"SELECT 1":                           false,
		"  select * from t":                  false,
		"(SELECT 1) UNION (SELECT 2)":        false,
		"-- note\nSELECT 1":                  false,
		"/* x */ SELECT 1":                   false,
		"VALUES (1)":                         false,
		"EXPLAIN QUERY PLAN SELECT 1":        false,
		"INSERT INTO t VALUES (1)":           true,
		"update t set n = 1":                 true,
		"DELETE FROM t":                      true,
		"WITH x AS (SELECT 1) INSERT INTO t": true,
		"SAVEPOINT s":                        true,
		"PRAGMA journal_mode=WAL":            true,
		"/* unterminated":                    true,
	} {
		if got := writes(q); got != want {
			t.Errorf("writes(%q) = %v, want %v", q, got, want)
		}
	}
}
