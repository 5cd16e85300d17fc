package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// anchorPackage is the server of loadtest anchor: the test application, whose
// create of a shipment exists without the hook, in both modes, written by
// hand without the library, and as a hand-written mutation that opts in with
// @idempotent.
const anchorPackage = "github.com/goovo/idem/internal/testkit/testapp/benchserver"

// anchorVariant is one create the anchor compares: the same shipment,
// made by field.
type anchorVariant struct {
	name, field string
	keyed       bool
}

var anchorVariants = []anchorVariant{
	{"plain", "createShipmentPlain", false},
	{"atomic", "createShipmentAtomic", true},
	{"lease", "createShipmentLease", true},
	{"handwritten", "createShipmentHandwritten", true},
	// A hand-written mutation that opts in with @idempotent: its resolver
	// creates the shipment itself, its records IdempotencyRecord rows.
	{"optin-atomic", "createShipmentOptIn", true},
	{"optin-lease", "createShipmentOptInLease", true},
}

// anchorTotals is what one variant did over all its phases.
type anchorTotals struct {
	done             int
	elapsed          time.Duration
	serverCPU, pgCPU float64 // seconds
	latencies        []time.Duration
}

// runAnchor measures the plain anchor of throughput: cfg.servers processes
// of the test application's server, each variant of anchorVariants in
// turn for cfg.duration/rounds, rounds times, so that the machine's noise
// hits them alike. It prints each variant's mutations per second, its
// latencies under load and the CPU its servers and their PostgreSQL
// backends spent per mutation, and their ratios to plain.
func runAnchor(e *runEnv, cfg *benchConfig) error {
	ctx, tmp, db := e.ctx, e.tmp, e.db
	bin := cfg.anchorBin
	if bin == "" {
		bin = filepath.Join(tmp, "benchserver")
		if out, err := exec.Command("go", "build", "-o", bin, anchorPackage).CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", anchorPackage, err, out)
		}
	}
	app := "loadtest_" + runID()
	f := &fleet{bin: bin, env: db.serverEnv(dsnParams("application_name", app)), args: driverArgs(cfg.dbDriver), logDir: tmp, bare: true}
	defer f.stop()
	for range cfg.servers {
		if err := f.add(ctx, profile{name: "anchor"}); err != nil {
			return err
		}
	}
	phase := cfg.duration / time.Duration(cfg.rounds)
	fmt.Printf("anchor: %d test application servers, %d clients, %d rounds of %v per create, on the %s\n",
		cfg.servers, cfg.clients, cfg.rounds, phase, db.name)
	c := &client{
		http:         &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.clients, MaxIdleConns: cfg.clients * 2}, Timeout: 30 * time.Second},
		fleet:        f,
		tenantHeader: "X-Org",
	}
	pids, run := f.pids(), runID()
	totals := map[string]*anchorTotals{}
	var seq atomic.Int64
	key := func() string { return fmt.Sprintf("anchor-%s-%d", run, seq.Add(1)) }
	for round := range cfg.rounds {
		for _, v := range anchorVariants {
			if totals[v.name] == nil {
				totals[v.name] = &anchorTotals{}
			}
			if err := totals[v.name].measure(e, c, pids, app, v, cfg.clients, phase, key); err != nil {
				return fmt.Errorf("%s, round %d: %w", v.name, round+1, err)
			}
		}
	}
	printAnchor(totals)
	return nil
}

// measure runs one phase of v and adds what it did to t.
func (t *anchorTotals) measure(e *runEnv, c *client, pids []int, app string, v anchorVariant, clients int, phase time.Duration, key func() string) error {
	backends, err := backendPIDs(e.ctx, e.db, app)
	if err != nil {
		return err
	}
	before := readCPU(pids)
	done, elapsed, lat, err := anchorPhase(e.ctx, c, v, clients, phase, key)
	if err != nil {
		return err
	}
	after := readCPU(pids)
	// The pools may have opened connections during the phase: their
	// backends count from zero; those that ended count not at all.
	later, err := backendPIDs(e.ctx, e.db, app)
	if err != nil {
		return err
	}
	for pid := range later {
		backends[pid] = true
	}
	t.done += done
	t.elapsed += elapsed
	t.serverCPU += after.servers - before.servers
	for pid := range backends {
		if a, ok := after.postgres[pid]; ok {
			t.pgCPU += a - before.postgres[pid]
		}
	}
	t.latencies = append(t.latencies, lat...)
	return nil
}

// printAnchor prints each variant's figures and their ratios to plain, for
// people, then for bench/run.
func printAnchor(totals map[string]*anchorTotals) {
	plain := totals["plain"]
	rate := func(t *anchorTotals) float64 { return float64(t.done) / t.elapsed.Seconds() }
	perCall := func(cpu float64, t *anchorTotals) float64 { return cpu * 1e6 / float64(t.done) }
	q := func(l []time.Duration, p float64) float64 {
		return float64(l[int(p*float64(len(l)-1))].Microseconds())
	}
	for _, v := range anchorVariants {
		t := totals[v.name]
		slices.Sort(t.latencies)
		fmt.Printf("%-12s %7d in %6.2fs: %8.1f/s (%.2f× plain), p50 %.0f µs, p99 %.0f µs; CPU per create: servers %.0f µs (%.2f× plain), their backends %.0f µs (%.2f× plain)\n",
			v.name, t.done, t.elapsed.Seconds(), rate(t), rate(t)/rate(plain), q(t.latencies, 0.5), q(t.latencies, 0.99),
			perCall(t.serverCPU, t), perCall(t.serverCPU, t)/perCall(plain.serverCPU, plain),
			perCall(t.pgCPU, t), perCall(t.pgCPU, t)/perCall(plain.pgCPU, plain))
	}
	for _, v := range anchorVariants {
		t := totals[v.name]
		fmt.Printf("ANCHOR variant=%s per_s=%.1f rate_ratio=%.3f p50_us=%.0f p99_us=%.0f server_cpu_us=%.0f server_cpu_ratio=%.3f backend_cpu_us=%.0f backend_cpu_ratio=%.3f\n",
			v.name, rate(t), rate(t)/rate(plain), q(t.latencies, 0.5), q(t.latencies, 0.99),
			perCall(t.serverCPU, t), perCall(t.serverCPU, t)/perCall(plain.serverCPU, plain),
			perCall(t.pgCPU, t), perCall(t.pgCPU, t)/perCall(plain.pgCPU, plain))
	}
}

// anchorPhase sends v's create from clients concurrent clients to the
// servers in turn until phase has passed; every create must succeed.
func anchorPhase(ctx context.Context, c *client, v anchorVariant, clients int, phase time.Duration, key func() string) (int, time.Duration, []time.Duration, error) {
	var (
		mu        sync.Mutex
		latencies []time.Duration
		firstErr  error
		wg        sync.WaitGroup
	)
	start := time.Now()
	stop := start.Add(phase)
	for i := range clients {
		wg.Go(func() {
			for time.Now().Before(stop) && ctx.Err() == nil {
				body := anchorBody(v, key())
				t := time.Now()
				err := anchorSend(ctx, c, i, body)
				d := time.Since(t)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					latencies = append(latencies, d)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr == nil && len(latencies) == 0 {
		firstErr = fmt.Errorf("nothing completed")
	}
	return len(latencies), elapsed, latencies, firstErr
}

// anchorBody is the create of v; the key, if any, travels as a variable,
// as idemclient sends it, so that every request is the same document.
func anchorBody(v anchorVariant, key string) []byte {
	if !v.keyed {
		return fmt.Appendf(nil, `{"query":"mutation { %s(input: {destination: \"Lyon\", weightGrams: 900}) { id destination weightGrams } }"}`, v.field)
	}
	return fmt.Appendf(nil, `{"query":"mutation($k: String!) { %s(idempotencyKey: $k, input: {destination: \"Lyon\", weightGrams: 900}) { id destination weightGrams } }","variables":{"k":%q}}`, v.field, key)
}

// anchorSend sends one create to server i; it must succeed.
func anchorSend(ctx context.Context, c *client, i int, body []byte) error {
	req, err := c.newRequest(ctx, i, "bench", bytes.NewReader(body))
	if err != nil {
		return err
	}
	status, b, err := c.roundTrip(req)
	if err != nil {
		return err
	}
	if status != http.StatusOK || bytes.Contains(b, []byte(`"errors"`)) {
		return fmt.Errorf("HTTP %d: %s", status, b)
	}
	return nil
}
