package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// loadtest bench measures the example server's mutations per second, or
// counts their statements (-count-statements); with -anchor (or as loadtest
// anchor) it measures the plain anchor of throughput instead (anchor.go).

// benchConfig holds the flags of loadtest bench and loadtest anchor.
type benchConfig struct {
	servers, clients int
	duration         time.Duration
	dbDriver         string
	countStatements  int
	anchor           bool
	rounds           int    // of the anchor
	anchorBin        string // the anchor's server
}

func defineBench(fs *flag.FlagSet) command {
	c := &benchConfig{}
	fs.IntVar(&c.countStatements, "count-statements", 0, "send this many of each mutation from one client to one server with log_statement=all and count their statements in the PostgreSQL log")
	fs.BoolVar(&c.anchor, "anchor", false, "the plain anchor instead, as loadtest anchor")
	c.define(fs)
	return c
}

func defineAnchor(fs *flag.FlagSet) command {
	c := &benchConfig{anchor: true}
	c.define(fs)
	return c
}

// define adds the flags bench and anchor share.
func (c *benchConfig) define(fs *flag.FlagSet) {
	fs.IntVar(&c.servers, "servers", 3, "server processes")
	fs.IntVar(&c.clients, "clients", 24, "concurrent clients")
	fs.DurationVar(&c.duration, "duration", time.Minute, "bench: how long each mutation runs; anchor: how long all rounds of each create run")
	fs.StringVar(&c.dbDriver, "db-driver", "", "servers' -db-driver: pgx or database/sql (default: the server's, pgx)")
	fs.IntVar(&c.rounds, "rounds", 5, "anchor: how many times each create gets its turn, for -duration/-rounds")
	fs.StringVar(&c.anchorBin, "anchor-bin", "", "anchor: the test application's server binary (default: go build "+anchorPackage+")")
}

func (c *benchConfig) check(_ *flag.FlagSet, dc *dbConfig) error {
	switch {
	case c.servers < 1 || c.clients < 1:
		return errors.New("-servers and -clients must be at least 1")
	case c.duration <= 0:
		return errors.New("the bench needs a positive -duration")
	case c.anchor && (c.countStatements > 0 || c.rounds < 1):
		return errors.New("the anchor takes no -count-statements, and -rounds of at least 1")
	case dc.pgbouncer && c.countStatements > 0:
		return errors.New("-count-statements sets log_statement per connection, which PgBouncer does not pass on")
	}
	return nil
}

// needs: the example server but for the anchor; the PostgreSQL log to count
// statements in.
func (c *benchConfig) needs() needs {
	return needs{server: !c.anchor, cluster: c.countStatements > 0}
}

// run runs the anchor, the statement count or the bench.
func (c *benchConfig) run(e *runEnv) error {
	switch {
	case c.anchor:
		return runAnchor(e, c)
	case c.countStatements > 0:
		return countStatements(e, c)
	}
	return runBench(e, c)
}

// runBench measures the servers' throughput without faults or duplicates:
// createOrder (atomic mode) for cfg.duration, then createPayment (lease
// mode, provider without latency or failures) of the orders just created
// for cfg.duration.
func runBench(e *runEnv, cfg *benchConfig) error {
	ctx, db, bin, tmp := e.ctx, e.db, e.bin, e.tmp
	// The servers' connections carry a name of their own, so that the CPU
	// of their PostgreSQL backends can be told from everyone else's.
	app := "loadtest_" + runID()
	f := &fleet{bin: bin, env: db.serverEnv(dsnParams("application_name", app)), args: benchArgs(cfg), logDir: tmp}
	defer f.stop()
	for range cfg.servers {
		if err := f.add(ctx, profile{name: "instant"}); err != nil {
			return err
		}
	}
	client := newClient(benchClient(cfg), f, &stats{})
	fmt.Printf("bench: %d servers, %d clients, %v per mutation, provider without latency or failures, on the %s\n",
		cfg.servers, cfg.clients, cfg.duration, db.name)

	pids, run := f.pids(), runID()
	backends := func() map[string]bool {
		b, _ := backendPIDs(ctx, db, app) // without them the CPU line counts no backend
		return b
	}
	orders, err := benchPhase(ctx, client, pids, backends, "createOrder (atomic)", cfg.clients, cfg.duration, 0, func(n int) *intent {
		return newIntent("createOrder", fmt.Sprintf("bench-%s-order-%d", run, n), "bench", 1000+n%1000, "")
	})
	if err != nil {
		return err
	}
	payments, err := benchPhase(ctx, client, pids, backends, "createPayment (lease)", cfg.clients, cfg.duration, len(orders.done), func(n int) *intent {
		o := orders.done[n]
		return newIntent("createPayment", "bench-pay-"+o.key, o.tenant, o.amount, orderID(o))
	})
	if err != nil {
		return err
	}
	fmt.Printf("BENCH servers=%d clients=%d createOrder_per_s=%.1f createPayment_per_s=%.1f\n",
		cfg.servers, cfg.clients, orders.rate(), payments.rate())
	return nil
}

// benchArgs: no lease-related waiting, no materializer, no sweeper (whose
// first sweep, at start, would count among the mutations' statements).
func benchArgs(cfg *benchConfig) []string {
	return append([]string{"-materialize-every", "0", "-sweep-every", "0"}, driverArgs(cfg.dbDriver)...)
}

// benchClient retries without abandoned attempts: every request is meant
// to complete.
func benchClient(cfg *benchConfig) clientConfig {
	return clientConfig{maxInFlight: cfg.clients, timeout: 30 * time.Second, abandonMax: 300 * time.Millisecond, maxBackoff: time.Second}
}

func orderID(o *intent) string {
	a, _ := o.result()
	var r orderResult
	_ = json.Unmarshal(a.data, &r)
	return r.CreateOrder.ID
}

// phaseResult is what one bench phase did.
type phaseResult struct {
	done    []*intent // succeeded, in no particular order
	elapsed time.Duration
}

func (p phaseResult) rate() float64 { return float64(len(p.done)) / p.elapsed.Seconds() }

// benchPhase runs intents made by next from clients concurrent clients
// until duration has passed (no new intent starts after it; started ones
// finish) or, when limit > 0, until limit intents were made. It prints the
// rate, the latencies and how the machine's CPU was spent (serverPIDs are
// the servers' processes, backends returns their PostgreSQL backends).
func benchPhase(ctx context.Context, c *client, serverPIDs []int, backends func() map[string]bool, name string, clients int, duration time.Duration, limit int, next func(n int) *intent) (phaseResult, error) {
	var (
		seq       atomic.Int64
		mu        sync.Mutex
		res       phaseResult
		latencies []time.Duration
		failed    atomic.Int64
		wg        sync.WaitGroup
	)
	cpuBefore := readCPU(serverPIDs)
	start := time.Now()
	stop := start.Add(duration)
	for i := range clients {
		wg.Go(func() {
			for time.Now().Before(stop) && ctx.Err() == nil {
				n := int(seq.Add(1) - 1)
				if limit > 0 && n >= limit {
					return
				}
				in := next(n)
				t := time.Now()
				if !c.perform(ctx, in, i) || !in.succeeded() {
					failed.Add(1)
					continue
				}
				mu.Lock()
				res.done = append(res.done, in)
				latencies = append(latencies, time.Since(t))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	cpu := cpuShare(cpuBefore, readCPU(serverPIDs), backends())
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if n := failed.Load(); n > 0 {
		return res, fmt.Errorf("%s: %d mutations did not succeed", name, n)
	}
	if len(latencies) == 0 {
		return res, fmt.Errorf("%s: nothing completed", name)
	}
	slices.Sort(latencies)
	q := func(p float64) time.Duration {
		return latencies[int(p*float64(len(latencies)-1))].Round(10 * time.Microsecond)
	}
	fmt.Printf("%-22s %7d in %6.2fs: %8.1f/s, latency p50 %v, p99 %v, retries so far %s\n",
		name, len(res.done), res.elapsed.Seconds(), res.rate(), q(0.5), q(0.99), &c.stats.retries)
	fmt.Printf("%-22s CPU: %s\n", "", cpu)
	return res, nil
}

// countStatements sends cfg.countStatements mutations of each kind, one at
// a time, to one server whose connections log every statement
// (log_statement=all, a superuser setting) under an application_name of
// their own, and counts the statements of those connections in the
// PostgreSQL log: the database round trips of one mutation.
func countStatements(e *runEnv, cfg *benchConfig) error {
	ctx, bin, tmp, db, pg := e.ctx, e.bin, e.tmp, e.db, e.dbServer
	app := "loadtest_" + runID()
	params := dsnParams("log_statement", "all", "application_name", app)
	f := &fleet{bin: bin, env: db.serverEnv(params), args: benchArgs(cfg), logDir: tmp}
	defer f.stop()
	if err := f.add(ctx, profile{name: "instant"}); err != nil {
		return err
	}
	c := newClient(benchClient(cfg), f, &stats{})
	logFile := pg.logFile()
	n := cfg.countStatements
	fmt.Printf("statements per mutation: %d of each, one client, one server, from %s\n", n, logFile)

	var orders, payments []*intent
	run := runID()
	phases := []struct {
		name string
		next func(i int) *intent
	}{
		{"createOrder (atomic, first request of a key)", func(i int) *intent {
			in := newIntent("createOrder", fmt.Sprintf("count-%s-order-%d", run, i), "bench", 1000+i, "")
			orders = append(orders, in)
			return in
		}},
		{"createOrder (replay)", func(i int) *intent { return orders[i] }},
		{"createPayment (lease, first request of a key)", func(i int) *intent {
			o := orders[i]
			p := newIntent("createPayment", "count-pay-"+o.key, o.tenant, o.amount, orderID(o))
			payments = append(payments, p)
			return p
		}},
		{"createPayment (replay)", func(i int) *intent { return payments[i] }},
	}
	for _, ph := range phases {
		offset, err := fileSize(logFile)
		if err != nil {
			return fmt.Errorf("read the PostgreSQL log (-count-statements needs it): %w", err)
		}
		for i := range n {
			in := ph.next(i)
			if !c.perform(ctx, in, 0) || !in.succeeded() {
				return fmt.Errorf("%s: %s did not succeed", ph.name, in.key)
			}
		}
		pids, err := backendPIDs(ctx, db, app)
		if err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond) // let the log catch up
		shapes, pings, err := readStatements(logFile, offset, pids)
		if err != nil {
			return err
		}
		total := 0
		for _, s := range shapes {
			total += s.count
		}
		fmt.Printf("\n%s: %.2f statements per mutation (%d \"-- ping\" connection checks not counted)\n", ph.name, float64(total)/float64(n), pings)
		for _, s := range shapes {
			fmt.Printf("  %5.2f  %s\n", float64(s.count)/float64(n), s.text)
		}
		fmt.Printf("STATEMENTS %q %.2f\n", ph.name, float64(total)/float64(n))
	}
	return nil
}

func fileSize(name string) (int64, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// backendPIDs returns the process ids of the PostgreSQL backends serving
// connections named app.
func backendPIDs(ctx context.Context, db *database, app string) (map[string]bool, error) {
	adm, err := db.admin()
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	rows, err := adm.QueryContext(ctx, `SELECT pid::text FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	pids := map[string]bool{}
	for rows.Next() {
		var pid string
		if err := rows.Scan(&pid); err != nil {
			return nil, err
		}
		pids[pid] = true
	}
	return pids, rows.Err()
}

// A statement line of the log, with Debian's default log_line_prefix
// ("%m [%p] %q%u@%d "): the pid, then "statement: …" (simple protocol) or
// "execute <name>: …" (extended protocol, pgx's prepared statements).
var statementLine = regexp.MustCompile(`^\S+ \S+ \S+ \[(\d+)\] .*?LOG:  (?:statement|execute [^:]*): (.*)$`)

type shape struct {
	text  string
	count int
}

// readStatements counts the statements the backends pids logged after
// offset, grouped by their text (whitespace collapsed, cut at 110
// characters), in order of first appearance.
func readStatements(name string, offset int64, pids map[string]bool) ([]shape, int, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, 0, err
	}
	defer fh.Close()
	if _, err := fh.Seek(offset, io.SeekStart); err != nil {
		return nil, 0, err
	}
	var (
		shapes []shape
		index  = map[string]int{}
		pings  int
	)
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := statementLine.FindStringSubmatch(sc.Text())
		if m == nil || !pids[m[1]] {
			continue
		}
		text := strings.Join(strings.Fields(m[2]), " ")
		if text == "-- ping" {
			pings++
			continue
		}
		if len(text) > 110 {
			text = text[:110] + "…"
		}
		i, ok := index[text]
		if !ok {
			i = len(shapes)
			index[text] = i
			shapes = append(shapes, shape{text: text})
		}
		shapes[i].count++
	}
	return shapes, pings, sc.Err()
}
