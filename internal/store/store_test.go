package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/store"
	"github.com/goovo/idem/internal/store/storetest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	_ "github.com/goovo/idem/internal/testkit/testapp/ent/runtime" // the fields' validators
)

// The conformance suite on every backend, over the test application's
// tables, made by ent from the mixin: IdempotencyRecord (records only) and
// Shipment (a business entity with UUID ids and its own scope column).
//
// PostgreSQL runs it twice: with the ent client on pgx (pgxdriver), where
// the driver pipelines, and on database/sql, where it sends one statement
// at a time.
func TestConformance(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		if !b.IsPostgres() {
			storetest.Run(t, func(t *testing.T) *storetest.Env { return open(t, b, false) })
			return
		}
		for _, pgx := range []bool{true, false} {
			t.Run(map[bool]string{true: "pgx", false: "database-sql"}[pgx], func(t *testing.T) {
				storetest.Run(t, func(t *testing.T) *storetest.Env { return open(t, b, pgx) })
			})
		}
	})
}

// open makes the test application's tables in a fresh database of b, and
// returns the store driver over an ent client on it: on pgx when pgx is
// set (PostgreSQL), else on database/sql.
func open(t *testing.T, b idemtest.Kind, pgx bool) *storetest.Env {
	db := idemtest.Open(t, b)
	client := ent.NewClient(ent.Driver(db.Driver))
	backend := client.IdempotencyBackend()
	testkit.Setup(t, db, backend, client.Schema.Create)
	if b.IsPostgres() {
		var drv idemtest.Driver
		var err error
		if pgx {
			drv, err = idemdb.Open(db.DSN)
		} else {
			drv, err = idemdb.OpenSQL(db.DSN, idemdb.Pool{})
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { drv.Close() })
		backend = ent.NewClient(ent.Driver(drv)).IdempotencyBackend()
	}
	return envOf(t, db, backend)
}

// envOf returns the store driver over backend, an ent client on db.
func envOf(t *testing.T, db *idemtest.DB, backend idembackend.Backend) *storetest.Env {
	d, err := store.Open(backend.Dialect(), backend, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	table := func(entity string, args map[string]any) storetest.Table {
		recs, ok := backend.Records(entity)
		if !ok {
			t.Fatalf("no record table %s", entity)
		}
		return storetest.Table{
			Table: store.Table{Name: recs.Table, Scope: recs.ScopeColumn, ID: recs.IDColumn},
			Insert: func(ctx context.Context, tx idembackend.Tx, c storetest.Claim) (bool, error) {
				return recs.Insert(ctx, tx, &idembackend.Claim{
					Tenant: c.Tenant, Key: c.Key, Fingerprint: c.Fingerprint,
					Attempt: 1, Mode: "LEASE", ClaimedAt: c.ClaimedAt, LeaseExpiresAt: c.LeaseUntil,
					Operation: c.Operation,
				}, args)
			},
		}
	}
	return &storetest.Env{
		Driver:   d,
		Records:  table("IdempotencyRecord", nil),
		Business: table("Shipment", map[string]any{"input": ent.CreateShipmentInput{Destination: "Lyon", WeightGrams: 1}}),
		Archive:  backend.ArchiveTable(),
		Count: func(ctx context.Context, table string) (int, error) {
			rows, err := db.Driver.DB().QueryContext(ctx, "SELECT count(*) FROM "+store.QuoteIn(backend.Dialect(), table))
			if err != nil {
				return 0, err
			}
			defer rows.Close()
			var n int
			for rows.Next() {
				err = rows.Scan(&n)
			}
			return n, errors.Join(err, rows.Err())
		},
	}
}

// A database that cannot be reached is ErrUnreachable, with the
// database's own words for operators.
func TestUnreachable(t *testing.T) {
	for _, c := range []struct{ name, dsn string }{
		{"postgres", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"},
		{"sqlite", "/nonexistent-directory/idem.db"},
		{"mariadb", "mysql://root@127.0.0.1:1/test?timeout=2s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			drv, err := idemdb.Open(c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			client := ent.NewClient(ent.Driver(drv))
			t.Cleanup(func() { client.Close() })
			backend := client.IdempotencyBackend()
			d, err := store.Open(backend.Dialect(), backend, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			err = d.Ping(context.Background())
			var se *store.Error
			if !errors.Is(err, store.ErrUnreachable) || !errors.As(err, &se) || se.Detail == "" || se.Op != "ping" {
				t.Fatalf("ping: %#v", err)
			}
			recs, _ := backend.Records("Shipment")
			_, _, err = d.Lookup(context.Background(), store.Ref{Table: store.Table{Name: recs.Table, Scope: recs.ScopeColumn, ID: recs.IDColumn}, Tenant: "t", Key: "k"})
			if !errors.Is(err, store.ErrUnreachable) {
				t.Fatalf("lookup: %v", err)
			}
		})
	}
}

func TestOpenRefusesAnUnknownDialect(t *testing.T) {
	if _, err := store.Open("oracle", nil, store.Options{}); err == nil {
		t.Fatal("oracle accepted")
	}
}

// SQLite has one writer: a statement that waits for the write lock past
// the busy timeout is ErrBusy, never an answer.
func TestSQLiteBusy(t *testing.T) {
	t.Parallel()
	env := open(t, idemtest.SQLite, false)
	ctx := context.Background()
	_, holder, err := env.Driver.Begin(ctx) // immediate: takes the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	err = env.Driver.Release(ctx, store.Lease{Ref: store.Ref{Table: env.Records.Table, Tenant: "t", Key: "k"}, Attempt: 1})
	if !errors.Is(err, store.ErrBusy) {
		t.Fatalf("release while another transaction writes: %v", err)
	}
}
