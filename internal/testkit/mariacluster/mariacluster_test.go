package mariacluster_test

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers "mysql"

	"github.com/goovo/idem/internal/testkit/mariacluster"
)

// A private server starts on its own port with the settings asked for;
// after a kill -9 in the middle of a transaction it starts again on the
// same data directory and port with what was committed and without what
// was not; Remove deletes it.
func TestKillAndRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s, err := mariacluster.Init(ctx, mariacluster.Options{Settings: map[string]string{"max_connections": "20"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Remove(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(s.Dir()); !os.IsNotExist(err) {
			t.Errorf("Remove left %s: %v", s.Dir(), err)
		}
	})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateDatabase(ctx, "kit"); err != nil {
		t.Fatal(err)
	}
	db := open(t, s.DSN("kit"))
	var maxConns int
	if err := db.QueryRowContext(ctx, "SELECT @@max_connections").Scan(&maxConns); err != nil || maxConns != 20 {
		t.Fatalf("max_connections %d (%v), want 20", maxConns, err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE kept (n INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	inFlight, err := db.BeginTx(ctx, nil)
	if err == nil {
		_, err = inFlight.ExecContext(ctx, "INSERT INTO kept VALUES (8)")
	}
	if err != nil {
		t.Fatal(err)
	}

	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Running() {
		t.Fatal("the server runs after Kill")
	}
	if _, err := inFlight.ExecContext(ctx, "INSERT INTO kept VALUES (9)"); err == nil {
		t.Error("a transaction survived the kill -9")
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var rows []int
	// A fresh pool: the old one's connections died with the server.
	res, err := open(t, s.DSN("kit")).QueryContext(ctx, "SELECT n FROM kept ORDER BY n")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	for res.Next() {
		var n int
		if err := res.Scan(&n); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, n)
	}
	if len(rows) != 1 || rows[0] != 7 {
		t.Fatalf("after kill -9 and restart: rows %v, want [7] (the committed row, not the open transaction's)", rows)
	}

	// Restart is the same crash and recovery, in one call.
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := open(t, s.DSN("kit")).QueryRowContext(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 1 {
		t.Fatalf("after Restart: %d rows (%v), want 1", n, err)
	}
}

// open opens a pool on dsn, closed when the test ends.
func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
