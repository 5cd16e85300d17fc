package pgxdriver_test

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/goovo/idem/ent"
	_ "github.com/goovo/idem/ent/runtime" // the idemschema mixin's interceptors and the fields' validators
	"github.com/goovo/idem/idemdb/pgxdriver"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/pgproxy"
)

// env is one test's database: a fresh PostgreSQL schema with the example
// application's tables (ent/), a Driver on it through a proxy that counts
// round trips, and an ent client over each of the Driver and database/sql.
type env struct {
	t     testing.TB
	db    *idemtest.DB
	proxy *pgproxy.Proxy
	drv   *pgxdriver.Driver
	// client is the example's ent client over drv; std over database/sql
	// (idemdb.Open, the path the framework takes today), not proxied.
	client, std *ent.Client
	// app is the application_name of drv's connections.
	app string
	// proxied is the database's URL through the proxy.
	proxied string
}

// newEnv makes the test's database. configure, if not nil, changes the
// pool's configuration before the pool is made.
func newEnv(t testing.TB, configure func(*pgxpool.Config)) *env {
	t.Helper()
	db := idemtest.Open(t, idemtest.Postgres)
	std := ent.NewClient(ent.Driver(db.Driver))
	testkit.Setup(t, db, std.IdempotencyBackend(), std.Schema.Create)
	proxy, dsn, err := pgproxy.For(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	app := "pgxdriver-test-" + hex.EncodeToString(suffix)
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	cfg.MaxConns = 4
	if configure != nil {
		configure(cfg)
	}
	drv, err := pgxdriver.OpenConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testkit.CloseInCleanup(t, "the pgx pool", func() { drv.Close() })
	return &env{t: t, db: db, proxy: proxy, drv: drv, client: ent.NewClient(ent.Driver(drv)), std: std, app: app, proxied: dsn}
}

// roundTrips runs f and returns the round trips and statements it cost
// through the proxy.
func (e *env) roundTrips(f func()) (trips, statements int) {
	e.t.Helper()
	e.proxy.Reset()
	f()
	return e.proxy.RoundTrips(), e.proxy.Statements()
}

// warm runs f once so that the connections have the statements prepared
// (pgx's statement cache: the first use of a statement on a connection
// costs one more round trip to prepare it).
func warm(f func()) { f() }

// must fails the test on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
