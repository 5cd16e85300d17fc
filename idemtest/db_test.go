package idemtest_test

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/goovo/idem/idemtest"
)

// Close removes what Connect made: the SQLite file's directory, the
// PostgreSQL schema.
func TestCloseRemovesTheDatabase(t *testing.T) {
	ctx := context.Background()
	for _, b := range idemtest.Kinds() {
		t.Run(string(b), func(t *testing.T) {
			db, err := idemtest.Connect(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Driver.DB().ExecContext(ctx, "CREATE TABLE probe (id INTEGER PRIMARY KEY)"); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if !b.IsPostgres() {
				if _, err := os.Stat(filepath.Dir(db.DSN)); !os.IsNotExist(err) {
					t.Fatalf("the SQLite database's directory is still there: %v", err)
				}
				return
			}
			u, err := url.Parse(db.DSN)
			if err != nil {
				t.Fatal(err)
			}
			schema := u.Query().Get("search_path")
			admin, err := sql.Open("pgx", idemtest.PostgresURL())
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			var n int
			if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", schema).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if schema == "" || n != 0 {
				t.Fatalf("schema %q: %d left after Close", schema, n)
			}
		})
	}
}

func TestConnectRefusesAnUnknownBackend(t *testing.T) {
	if _, err := idemtest.Connect(context.Background(), "mysql"); err == nil {
		t.Fatal("Connect accepted an unknown backend")
	}
}
