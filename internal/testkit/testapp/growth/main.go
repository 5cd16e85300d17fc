// Command growth measures how the cost of idempotency grows with the data
// (bench/growth runs it; BENCHMARKS.md's growth table): on PostgreSQL, in a
// database of its own, it fills the test application's record table
// (shipments) with -records generated rows (INSERT … SELECT
// generate_series, not requests) of -tenants tenants, optionally on the
// partitioned layout (idempartition.ByTenant), then times through the
// whole stack (HTTP handler, gqlgen, the hook, ent, PostgreSQL), one
// request at a time and interleaved:
//
//	plain     the create without the hook (the anchor)
//	claim     an atomic-mode create of a new key
//	replay    a retry (Idempotency-Retry) of a stored key: the lookup, then the replay
//	replay-claim-first  the same without the header: the claim finds the key taken
//	takeover  a retry of a pending claim whose lease ran out
//
// then the recoverer's listing of its turn (store.Abandoned, 100 claims)
// and the sweeper (idemctl's Sweep) over the same number of expired
// records at every size, so that their cost per record shows whether it
// grows with the table or only with the work. It prints one GROWTH line
// per figure, and EXPLAIN ANALYZE of the request path's statements and the
// recoverer's listing with -explain.
//
//	TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test go run ./internal/testkit/testapp/growth -records 1000000
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idempartition"
	"github.com/goovo/idem/internal/store"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	_ "github.com/goovo/idem/internal/testkit/testapp/ent/runtime" // the idemschema mixin's interceptors and the fields' validators
	"github.com/goovo/idem/internal/testkit/testapp/graph"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "growth:", err)
		os.Exit(1)
	}
}

type options struct {
	records, tenants, samples, work int
	partitioned, explain, keep      bool
}

func run() error {
	o, err := parseOptions()
	if err != nil {
		return err
	}
	ctx := context.Background()
	dsn, drop, err := createDatabase(ctx, o)
	if err != nil {
		return err
	}
	defer drop()
	s, err := openStack(ctx, o, dsn)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.fill(ctx, o); err != nil {
		return err
	}
	if err := s.measureRequests(o); err != nil {
		return err
	}
	table := store.Table{Name: "shipments", Scope: "org", ID: "id"}
	if err := s.measureListing(ctx, o, table); err != nil {
		return err
	}
	if o.explain {
		if err := s.explainAll(ctx, o, table); err != nil {
			return err
		}
	}
	return s.measureSweep(ctx, o)
}

// parseOptions reads the command line.
func parseOptions() (options, error) {
	var o options
	flag.IntVar(&o.records, "records", 10000, "generated records in the table")
	flag.IntVar(&o.tenants, "tenants", 100, "tenants the records belong to")
	flag.IntVar(&o.samples, "samples", 1000, "requests of each kind")
	flag.IntVar(&o.work, "work", 10000, "expired records the sweeper archives and abandoned claims the recoverer lists from, at every size (at most a fifth of -records)")
	flag.BoolVar(&o.partitioned, "partitioned", false, "the partitioned layout (idempartition.ByTenant, 8 partitions)")
	flag.BoolVar(&o.explain, "explain", false, "print EXPLAIN (ANALYZE, BUFFERS) of the statements measured")
	flag.BoolVar(&o.keep, "keep", false, "keep the database")
	flag.Parse()
	o.work = min(o.work, o.records/5)
	if o.samples > o.work {
		return o, fmt.Errorf("-samples %d exceeds the pending claims available for takeovers (%d)", o.samples, o.work)
	}
	return o, nil
}

// createDatabase creates the run's database and returns its URL, and drop,
// which drops it (unless -keep).
func createDatabase(ctx context.Context, o options) (dsn string, drop func(), err error) {
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("idem_growth_%d", os.Getpid())
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return "", nil, err
	}
	drop = func() {
		defer admin.Close()
		if o.keep {
			return
		}
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "growth: drop database %s: %v\n", name, err)
		}
	}
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// stack is what the run measures: the example's server with the hook, on
// a database of its own, and a database/sql view of it.
type stack struct {
	client *ent.Client
	db     *sql.DB
	hook   *idem.Hook
	h      http.Handler
	done   chan struct{}
}

func (s *stack) close() {
	close(s.done)
	s.db.Close()
	s.client.Close()
}

// openStack migrates the database at dsn (partitioned with -partitioned)
// and serves the example's schema on it with the hook.
func openStack(ctx context.Context, o options, dsn string) (*stack, error) {
	drv, err := idemdb.OpenPool(dsn, idemdb.Pool{})
	if err != nil {
		return nil, err
	}
	s := &stack{client: ent.NewClient(ent.Driver(drv)), done: make(chan struct{})}
	if s.db, err = sql.Open("pgx", dsn); err != nil {
		s.client.Close()
		return nil, err
	}
	if err := s.serve(ctx, o); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// serve migrates the database and puts the hook on the example's server.
func (s *stack) serve(ctx context.Context, o options) error {
	if err := s.client.Schema.Create(ctx); err != nil {
		return err
	}
	if o.partitioned {
		if _, err := idempartition.ByTenant(ctx, s.client.IdempotencyBackend(), idempartition.Options{}); err != nil {
			return err
		}
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	hook, err := idem.New(idem.Config{Backend: s.client.IdempotencyBackend(), Tenant: graph.OrgFromContext,
		TenantContext: graph.OrgContext, Logger: logger, Done: s.done})
	if err != nil {
		return err
	}
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Client: s.client}}))
	srv.AddTransport(transport.POST{})
	hh, err := hook.Handler(srv)
	if err != nil {
		return err
	}
	s.hook, s.h = hook, graph.WithOrg(hh)
	return nil
}

// fill generates the records, with the fingerprint and response of the
// request the measurements send, which a probe stores first.
func (s *stack) fill(ctx context.Context, o options) error {
	if err := send(s.h, "t0", atomicBody("probe"), false); err != nil {
		return err
	}
	var (
		fp   string
		resp []byte
	)
	if err := s.db.QueryRowContext(ctx, `SELECT idempotency_fingerprint, idempotency_response FROM shipments WHERE idempotency_key = 'probe'`).Scan(&fp, &resp); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	layout := "one table"
	if o.partitioned {
		layout = "partitioned by tenant (8 partitions)"
	}
	fmt.Printf("growth: %d records of %d tenants, %s; %d expired records and %d abandoned claims among them\n", o.records, o.tenants, layout, o.work, o.work)
	start := time.Now()
	if err := fill(ctx, s.db, o, fp, resp); err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	fmt.Printf("filled in %v\n", time.Since(start).Round(time.Second))
	return nil
}

// measureRequests times each kind of request, -samples of each, and
// prints their p50 and p99.
func (s *stack) measureRequests(o options) error {
	// Keys: g in [1, work] expired (swept), (work, 2 work] pending and
	// abandoned (taken over), the rest stored.
	rng := rand.New(rand.NewPCG(1, uint64(o.records)))
	stored := func() (string, string) {
		g := 2*o.work + 1 + rng.IntN(o.records-2*o.work)
		return tenantOf(g, o.tenants), fmt.Sprintf("k%d", g)
	}
	lat := map[string][]time.Duration{}
	kinds := []string{"plain", "claim", "replay", "replay-claim-first", "takeover"}
	for i := range o.samples {
		for _, k := range kinds {
			org, body, retry := tenantOf(rng.IntN(o.records)+1, o.tenants), "", false
			switch k {
			case "plain":
				body = `{"query":"mutation { createShipmentPlain(input: {destination: \"Lyon\", weightGrams: 900}) { id destination weightGrams } }"}`
			case "claim":
				body = atomicBody(fmt.Sprintf("new-%d", i))
			case "replay", "replay-claim-first":
				var key string
				org, key = stored()
				body, retry = atomicBody(key), k == "replay"
			case "takeover":
				g := o.work + 1 + i
				org, body = tenantOf(g, o.tenants), atomicBody(fmt.Sprintf("k%d", g))
			}
			t := time.Now()
			if err := send(s.h, org, body, retry); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			lat[k] = append(lat[k], time.Since(t))
		}
	}
	for _, k := range kinds {
		l := lat[k]
		slices.Sort(l)
		fmt.Printf("GROWTH records=%d tenants=%d partitioned=%t what=%s p50_us=%d p99_us=%d\n", o.records, o.tenants, o.partitioned, k,
			l[len(l)/2].Microseconds(), l[len(l)*99/100].Microseconds())
	}
	return nil
}

// measureListing times the recoverer's listing of a turn, over the
// abandoned claims left.
func (s *stack) measureListing(ctx context.Context, o options, table store.Table) error {
	st, err := store.Open("postgres", s.client.IdempotencyBackend(), store.Options{})
	if err != nil {
		return err
	}
	var listings []time.Duration
	listed := 0
	for range 20 {
		now := time.Now()
		t := time.Now()
		claims, err := st.Abandoned(ctx, store.AbandonedQuery{Table: table, LeaseEndedBefore: now.Add(-time.Minute),
			ClaimedBefore: now.Add(-idem.DefaultRetention), Limit: 100})
		if err != nil {
			return err
		}
		listings = append(listings, time.Since(t))
		listed = len(claims)
	}
	slices.Sort(listings)
	fmt.Printf("GROWTH records=%d tenants=%d partitioned=%t what=recoverer-listing p50_us=%d per_record_us=%.1f listed=%d\n", o.records, o.tenants, o.partitioned,
		listings[len(listings)/2].Microseconds(), float64(listings[len(listings)/2].Microseconds())/float64(max(listed, 1)), listed)
	return nil
}

// explainAll prints EXPLAIN (ANALYZE, BUFFERS) of the statements measured.
func (s *stack) explainAll(ctx context.Context, o options, table store.Table) error {
	db := s.db
	var archive string
	if err := db.QueryRowContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_name LIKE '%archive%' AND table_schema = current_schema() LIMIT 1`).Scan(&archive); err != nil {
		return fmt.Errorf("archive table: %w", err)
	}
	q := store.PostgresExplained(table, archive)
	key := 2*o.work + 7
	explain(ctx, db, "the lookup (a retry's first statement)", q["lookup"], tenantOf(key, o.tenants), fmt.Sprintf("k%d", key))
	now := time.Now()
	explain(ctx, db, "the recoverer's listing of a turn", q["abandoned"], now.Add(-time.Minute), 100, now.Add(-idem.DefaultRetention))
	explain(ctx, db, "a sweep's archive batch (rolled back)", q["archive"], now.Add(-idem.DefaultRetention), idemctl.DefaultSweepBatch, "shipments", now, "", time.Time{})
	return nil
}

// measureSweep times the sweeper over the same number of expired records
// at every size.
func (s *stack) measureSweep(ctx context.Context, o options) error {
	t := time.Now()
	rep, err := idemctl.New(s.hook).Sweep(ctx, idemctl.SweepOptions{})
	if err != nil {
		return err
	}
	el := time.Since(t)
	fmt.Printf("GROWTH records=%d tenants=%d partitioned=%t what=sweep elapsed_ms=%d archived=%d per_record_us=%.1f\n", o.records, o.tenants, o.partitioned,
		el.Milliseconds(), rep.Archived(), float64(el.Microseconds())/float64(max(rep.Archived(), 1)))
	return nil
}

func tenantOf(g, tenants int) string { return fmt.Sprintf("t%d", g%tenants) }

func atomicBody(key string) string {
	return fmt.Sprintf(`{"query":"mutation($k: String!) { createShipmentAtomic(idempotencyKey: $k, input: {destination: \"Lyon\", weightGrams: 900}) { id destination weightGrams } }","variables":{"k":%q}}`, key)
}

// send posts body as org and fails unless it succeeds; retry marks it as a
// client's retry (idemclient's Idempotency-Retry).
func send(h http.Handler, org, body string, retry bool) error {
	req := httptest.NewRequest(http.MethodPost, "/query", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(graph.OrgHeader, org)
	if retry {
		req.Header.Set(idemcode.HeaderRetry, "1")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `"errors"`) {
		return errors.New(rec.Body.String())
	}
	return nil
}

// fill generates the records in batches of a million rows (one
// transaction each): g ≤ work expired (completed before the retention),
// work < g ≤ 2 work pending with a lease that ran out an hour ago, the rest
// completed an hour ago; then VACUUM ANALYZE.
func fill(ctx context.Context, db *sql.DB, o options, fp string, resp []byte) error {
	const batch = 1_000_000
	for from := 1; from <= o.records; from += batch {
		to := min(from+batch-1, o.records)
		_, err := db.ExecContext(ctx, `INSERT INTO shipments (id, org, destination, weight_grams, created_at,
				idempotency_key, idempotency_status, idempotency_fingerprint, idempotency_attempt, idempotency_response,
				idempotency_lease_expires_at, idempotency_claimed_at, idempotency_completed_at, idempotency_operation)
			SELECT gen_random_uuid(), 't' || (g % $3), 'Lyon', 900, now(),
				'k' || g,
				CASE WHEN g > $4 AND g <= 2 * $4 THEN 'pending' ELSE 'succeeded' END,
				$5, 1,
				CASE WHEN g > $4 AND g <= 2 * $4 THEN NULL ELSE $6::bytea END,
				now() - interval '1 hour',
				CASE WHEN g <= $4 THEN now() - interval '49 hours' ELSE now() - interval '1 hour' END,
				CASE WHEN g <= $4 THEN now() - interval '48 hours' WHEN g <= 2 * $4 THEN NULL ELSE now() - interval '1 hour' END,
				CASE WHEN g > $4 AND g <= 2 * $4 THEN convert_to('{"query":"mutation { __typename }"}', 'UTF8') END
			FROM generate_series($1::bigint, $2::bigint) AS g`, from, to, o.tenants, o.work, fp, resp)
		if err != nil {
			return err
		}
	}
	_, err := db.ExecContext(ctx, `VACUUM ANALYZE shipments`)
	return err
}

// explain prints EXPLAIN ANALYZE of query in a transaction it rolls back.
func explain(ctx context.Context, db *sql.DB, what, query string, args ...any) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		fmt.Printf("EXPLAIN %s: %v\n", what, err)
		return
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+query, args...)
	if err != nil {
		fmt.Printf("EXPLAIN %s: %v\n", what, err)
		return
	}
	defer rows.Close()
	fmt.Printf("EXPLAIN %s:\n", what)
	for rows.Next() {
		var line string
		_ = rows.Scan(&line)
		fmt.Println("  " + line)
	}
}
