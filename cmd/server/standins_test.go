package main

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/example/mailer"
	"github.com/goovo/idem/internal/example/provider"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// A server started with -migrate=false changes no schema: on a database
// whose application tables exist (ent's and River's) but not the simulated
// provider's and mailer's, it stops at start, names the missing table and
// the way out, and creates nothing. Once their tables exist (what
// cmd/migrate up makes on PostgreSQL, provider.Migrate and mailer.Migrate
// here), it starts.
func TestNoAutomaticMigrationRefusesMissingStandInTables(t *testing.T) {
	bin := proctest.Build(t, ".")
	for _, b := range []idemtest.Kind{idemtest.SQLite, idemtest.Postgres, idemtest.MariaDB} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			db := idemtest.Open(t, b)
			ctx := context.Background()
			if err := graph.Migrate(ctx, ent.NewClient(ent.Driver(db.Driver)), db.Driver); err != nil {
				t.Fatal(err)
			}
			env, args := serverDatabase(db)
			args = append(args, "-migrate=false")
			p := proctest.Start(t, bin, env, append([]string{"-addr", proctest.FreeAddr(t)}, args...))
			select {
			case <-p.Done():
			case <-time.After(testkit.WaitBound):
				t.Fatalf("the server did not stop without the stand-ins' tables:\n%s", p.Output())
			}
			out := p.Output()
			if p.Wait() == nil || !strings.Contains(out, provider.Table) || !strings.Contains(out, "-migrate=false creates none") {
				t.Fatalf("the server without the stand-ins' tables: %v\n%s", p.Wait(), out)
			}
			if b == idemtest.Postgres && !strings.Contains(out, "cmd/migrate up") {
				t.Fatalf("the refusal does not name the versioned migrations:\n%s", out)
			}
			if b == idemtest.MariaDB && !strings.Contains(out, "graph.MySQLTables") {
				t.Fatalf("the refusal does not name the MySQL statements:\n%s", out)
			}
			ledger := openLedgerDB(t, ledgerDSN(db))
			for _, table := range []string{provider.Table, mailer.Table} {
				if _, err := ledger.ExecContext(ctx, "SELECT 1 FROM "+table); err == nil {
					t.Fatalf("the server with -migrate=false created %s", table)
				}
			}

			d := db.Driver.Dialect()
			if err := errors.Join(provider.Migrate(ctx, ledger, d), mailer.Migrate(ctx, ledger, d)); err != nil {
				t.Fatal(err)
			}
			startServer(t, bin, env, args)
		})
	}
}

// openLedgerDB opens the database of dsn, closed at the test's end.
func openLedgerDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	name, source, _ := idemdb.Resolve(dsn)
	db, err := sql.Open(name, source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
