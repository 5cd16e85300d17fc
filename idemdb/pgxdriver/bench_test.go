package pgxdriver_test

import (
	"context"
	"database/sql"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemdb/pgxdriver"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/pgxpipe"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/pgproxy"
)

// route is one way to run ent on PostgreSQL, with the two operations the
// benchmark compares: a plain create, and the transaction of a mutation
// (BEGIN, an ent insert, the fenced completion UPDATE, COMMIT).
type route struct {
	name   string
	create func(context.Context) error
	tx     func(context.Context) error
}

// routes opens every route on dsn.
func routes(tb testing.TB, dsn string) []route {
	tb.Helper()
	// database/sql, as idemdb.Open opens it today.
	std, err := idemdb.OpenSQL(dsn, idemdb.Pool{})
	must(tb, err)
	tb.Cleanup(func() { std.Close() })
	stdClient := ent.NewClient(ent.Driver(std))

	// The driver of this package.
	cfg, err := pgxpool.ParseConfig(dsn)
	must(tb, err)
	cfg.MaxConns = 4
	drv, err := pgxdriver.OpenConfig(cfg)
	must(tb, err)
	tb.Cleanup(func() { drv.Close() })
	pgxClient := ent.NewClient(ent.Driver(drv))

	// database/sql kept for ent, pgx reached through (*sql.Conn).Raw for
	// the protocol's own statements. database/sql sends ent's statements,
	// so BEGIN cannot travel with the first of them: it goes alone.
	rawDB, err := sql.Open("pgx", dsn)
	must(tb, err)
	rawDB.SetMaxOpenConns(4)
	rawDB.SetMaxIdleConns(4)
	tb.Cleanup(func() { rawDB.Close() })

	// database/sql over the driver's pgxpool (stdlib.OpenDBFromPool), the
	// view the driver gives migrations.
	poolClient := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.Postgres, drv.DB())))

	create := func(c *ent.Client) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := newOrder(ctx, c, 1)
			return err
		}
	}
	return []route{
		{
			name:   "database-sql",
			create: create(stdClient),
			tx: func(ctx context.Context) error {
				tx, err := stdClient.Tx(ctx)
				if err != nil {
					return err
				}
				o, err := newOrder(ctx, tx.Client(), 1)
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, complete, o.ID, 1); err != nil {
					return err
				}
				return tx.Commit()
			},
		},
		{
			name:   "pgx",
			create: create(pgxClient),
			tx: func(ctx context.Context) error {
				tx, err := pgxClient.Tx(ctx)
				if err != nil {
					return err
				}
				o, err := newOrder(ctx, tx.Client(), 1)
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, complete, o.ID, 1); err != nil {
					return err
				}
				return tx.Commit()
			},
		},
		{
			name: "pgx-pipelined",
			tx: func(ctx context.Context) error {
				var ptx pgxpipe.Tx
				tx, err := pgxClient.Tx(pgxpipe.CaptureTx(ctx, &ptx))
				if err != nil {
					return err
				}
				o, err := newOrder(ctx, tx.Client(), 1)
				if err != nil {
					return err
				}
				ptx.Queue(complete, o.ID, 1)
				return tx.Commit()
			},
		},
		{
			name: "conn-raw",
			tx: func(ctx context.Context) error {
				conn, err := rawDB.Conn(ctx)
				if err != nil {
					return err
				}
				defer conn.Close()
				pgxConn := func(f func(*pgx.Conn) error) error {
					return conn.Raw(func(dc any) error { return f(dc.(*stdlib.Conn).Conn()) })
				}
				if err := pgxConn(func(c *pgx.Conn) error { _, err := c.Exec(ctx, "begin"); return err }); err != nil {
					return err
				}
				c := ent.NewClient(ent.Driver(entsql.NewDriver(dialect.Postgres, entsql.Conn{ExecQuerier: conn})))
				o, err := newOrder(ctx, c, 1)
				if err != nil {
					return err
				}
				return pgxConn(func(c *pgx.Conn) error {
					b := &pgx.Batch{}
					b.Queue(complete, o.ID, 1)
					b.Queue("commit")
					return c.SendBatch(ctx, b).Close()
				})
			},
		},
		{
			name:   "database-sql-over-pgxpool",
			create: create(poolClient),
		},
	}
}

// BenchmarkRoutes measures a plain ent create and the transaction of a
// mutation through each route, interleaved in every round so that the
// machine's noise hits them alike, and reports the median of each (µs),
// their ratios to database/sql's, and the round trips of each, counted
// beforehand through a proxy (pgproxy).
//
// With PGXBENCH_ASYNC_COMMIT=1 the benchmark's connections commit without
// waiting for the WAL flush (synchronous_commit=off, for their sessions
// only): the disk's flush time, which varies by milliseconds on a shared
// machine, then no longer hides the round trips.
func BenchmarkRoutes(b *testing.B) {
	db := idemtest.Open(b, idemtest.Postgres)
	if os.Getenv("PGXBENCH_ASYNC_COMMIT") == "1" {
		db.DSN += "&synchronous_commit=off"
	}
	std := ent.NewClient(ent.Driver(db.Driver))
	testkit.Setup(b, db, std.IdempotencyBackend(), std.Schema.Create)
	ctx := context.Background()

	proxy, proxied, err := pgproxy.For(db.DSN)
	must(b, err)
	trips := map[string]int{} // reported at the end: ResetTimer drops metrics
	for _, r := range routes(b, proxied) {
		for _, op := range []struct {
			name string
			f    func(context.Context) error
		}{{"create", r.create}, {"tx", r.tx}} {
			if op.f == nil {
				continue
			}
			for range 3 { // prepares the statements; stdlib pings a connection the first time it is reused
				must(b, op.f(ctx))
			}
			proxy.Reset()
			must(b, op.f(ctx))
			trips[op.name+"/"+r.name] = proxy.RoundTrips()
		}
	}
	proxy.Close()

	rs := routes(b, db.DSN)
	samples := map[string][]time.Duration{}
	run := func(name string, f func(context.Context) error) {
		start := time.Now()
		if err := f(ctx); err != nil {
			b.Fatal(err)
		}
		samples[name] = append(samples[name], time.Since(start))
	}
	for _, r := range rs { // warm up every connection
		for range 4 {
			if r.create != nil {
				run("", r.create)
			}
			if r.tx != nil {
				run("", r.tx)
			}
		}
	}
	clear(samples)
	b.ResetTimer()
	for b.Loop() {
		for _, r := range rs {
			if r.create != nil {
				run("create/"+r.name, r.create)
			}
			if r.tx != nil {
				run("tx/"+r.name, r.tx)
			}
		}
	}
	b.StopTimer()
	p50 := map[string]float64{}
	for name, s := range samples {
		slices.Sort(s)
		p50[name] = float64(s[len(s)/2].Nanoseconds()) / 1e3
		b.ReportMetric(p50[name], name+"-p50-µs")
	}
	for name, v := range p50 {
		op, _, _ := strings.Cut(name, "/")
		b.ReportMetric(v/p50[op+"/database-sql"], name+"/database-sql")
		b.ReportMetric(float64(trips[name]), name+"-roundtrips")
	}
}
