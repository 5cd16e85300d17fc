package idemctl_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp"
)

// The sweep at scale, on PostgreSQL, while clients keep making new claims:
//
//  1. N expired records (SWEEP_ROWS, default 100,000, which a CI machine
//     with 2 CPUs sweeps in about 40 s all told; the figure is
//     1,000,000) wait in the table that a steady load of createShipment
//     mutations (through the real hook, LOAD_WORKERS at once, default 8)
//     keeps claiming in;
//  2. the load runs alone for a while (the baseline, measured before and
//     after the sweeps), then with one `idemctl sweep` running: the
//     latency of the new claims with and without the sweep is reported
//     (p50, p99, max, and the p99 ratio), and asserted only loosely: no
//     claim failed, none took longer than 2 s (or, on a machine so busy
//     that claims without a sweep took longer than half a second, four
//     times the longest of those: what the machine does by itself is not
//     the sweep's doing);
//  3. N more expired records, and two sweepers at once: each record is
//     archived exactly once, the two reports add up to N, the archive has
//     no (table, tenant, key, claimed_at) twice;
//  4. every response that existed is in its record or in the archive, byte
//     for byte: count before = records still holding one + archive rows.
func TestSweepUnderLoad(t *testing.T) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("SWEEP_ROWS")); err == nil && v > 0 {
		n = v
	}
	workers := 8
	if v, err := strconv.Atoi(os.Getenv("LOAD_WORKERS")); err == nil && v > 0 {
		workers = v
	}
	const baseline = 3 * time.Second
	be := newBench(t, idemtest.Postgres)
	db := be.DB.Driver.DB()

	start := time.Now()
	fillShipments(t, db, "old-a-", n)
	t.Logf("%d expired records inserted in %v", n, time.Since(start).Round(time.Millisecond))

	loadStart := time.Now()
	load := startLoad(t, be, workers)
	time.Sleep(baseline)

	// One sweeper under load.
	sweepStart := time.Now()
	one := sweep(t, be)
	sweepEnd := time.Now()
	if !one.Complete || one.Archived != n || one.Purged != 0 {
		t.Fatalf("one sweeper: %+v", one)
	}

	// Two sweepers at once, on N more records (inserted with the load
	// paused, which is not measured meanwhile).
	load.paused.Store(true)
	fillStart := time.Now()
	fillShipments(t, db, "old-b-", n)
	t.Logf("%d more expired records inserted in %v", n, time.Since(fillStart).Round(time.Millisecond))
	load.paused.Store(false)
	var two [2]sweepDoc
	var wg sync.WaitGroup
	twoStart := time.Now()
	for i := range two {
		wg.Go(func() { two[i] = sweep(t, be) })
	}
	wg.Wait()
	twoEnd := time.Now()
	time.Sleep(baseline) // the baseline again, after the sweeps
	results := load.stop()
	loadEnd := time.Now()

	// The load: no claim failed or waited long.
	if load.failures.Load() > 0 {
		t.Fatalf("%d claims failed; first: %s", load.failures.Load(), load.firstFailure.Load())
	}
	type window struct{ from, to time.Time }
	phases := []struct {
		name    string
		windows []window
	}{
		{"no sweep", []window{{loadStart, sweepStart}, {twoEnd, loadEnd}}},
		{"one sweeper", []window{{sweepStart, sweepEnd}}},
		{"two sweepers", []window{{twoStart, twoEnd}}},
	}
	var p99, longest [3]time.Duration
	for i, ph := range phases {
		var ds []time.Duration
		var span time.Duration
		for _, w := range ph.windows {
			span += w.to.Sub(w.from)
			for _, r := range results {
				if !r.at.Before(w.from) && r.at.Before(w.to) {
					ds = append(ds, r.took)
				}
			}
		}
		if len(ds) < 20 {
			t.Fatalf("%s: only %d claims measured", ph.name, len(ds))
		}
		slices.Sort(ds)
		p99[i], longest[i] = pct(ds, 0.99), ds[len(ds)-1]
		t.Logf("claims, %-12s: %6d in %-6v (%4.0f/s)  p50 %-8v p99 %-8v max %v", ph.name, len(ds), span.Round(100*time.Millisecond),
			float64(len(ds))/span.Seconds(), pct(ds, 0.5).Round(10*time.Microsecond), p99[i].Round(10*time.Microsecond), ds[len(ds)-1].Round(10*time.Microsecond))
	}
	t.Logf("p99 of claims: %.2f× with one sweeper, %.2f× with two, of the p99 without", ratio(p99[1], p99[0]), ratio(p99[2], p99[0]))
	t.Logf("one sweeper: %d records archived in %s: %.0f records/s (under load)", one.Archived, one.Elapsed, one.RecordsPerSecond)
	t.Logf("two sweepers: %d + %d = %d records archived in %v: %.0f records/s together (under load)",
		two[0].Archived, two[1].Archived, two[0].Archived+two[1].Archived, twoEnd.Sub(twoStart).Round(time.Millisecond),
		float64(two[0].Archived+two[1].Archived)/twoEnd.Sub(twoStart).Seconds())
	var worst time.Duration
	for _, r := range results {
		worst = max(worst, r.took)
	}
	if bound := max(2*time.Second, 4*longest[0]); worst > bound {
		t.Errorf("a claim took %v (bound %v; without a sweep the longest took %v)", worst, bound, longest[0])
	}

	// Two sweepers: each record archived once, the reports add up.
	if !two[0].Complete || !two[1].Complete || two[0].Archived+two[1].Archived != n {
		t.Fatalf("two sweepers archived %d + %d, want %d in all: %+v %+v", two[0].Archived, two[1].Archived, n, two[0], two[1])
	}

	// Nothing lost, nothing twice, every byte where it was.
	var q struct {
		loadKeys, loadHot, oldHot, tombstones, archive, archiveOK, dupClaims, dupKeys, orphans int
	}
	for _, c := range []struct {
		dst  *int
		stmt string
	}{
		{&q.loadKeys, `SELECT count(*) FROM shipments WHERE idempotency_key LIKE 'load-%'`},
		{&q.loadHot, `SELECT count(*) FROM shipments WHERE idempotency_key LIKE 'load-%' AND idempotency_response IS NOT NULL AND idempotency_archived_at IS NULL`},
		{&q.oldHot, `SELECT count(*) FROM shipments WHERE idempotency_key LIKE 'old-%' AND idempotency_response IS NOT NULL`},
		{&q.tombstones, `SELECT count(*) FROM shipments WHERE idempotency_archived_at IS NOT NULL AND idempotency_response IS NULL`},
		{&q.archive, `SELECT count(*) FROM idempotency_archives`},
		{&q.archiveOK, `SELECT count(*) FROM idempotency_archives a JOIN shipments s ON s.org = a.tenant_id AND s.idempotency_key = a.idempotency_key
			WHERE a.record_table = 'shipments' AND s.idempotency_archived_at IS NOT NULL AND a.idempotency_response = ` + oldResponse("a.idempotency_key")},
		{&q.dupClaims, `SELECT count(*) FROM (SELECT 1 FROM idempotency_archives GROUP BY record_table, tenant_id, idempotency_key, idempotency_claimed_at HAVING count(*) > 1) d`},
		{&q.dupKeys, `SELECT count(*) FROM (SELECT 1 FROM idempotency_archives GROUP BY record_table, tenant_id, idempotency_key HAVING count(*) > 1) d`},
		{&q.orphans, `SELECT count(*) FROM shipments s WHERE s.idempotency_archived_at IS NOT NULL AND NOT EXISTS
			(SELECT 1 FROM idempotency_archives a WHERE a.record_table = 'shipments' AND a.tenant_id = s.org AND a.idempotency_key = s.idempotency_key)`},
	} {
		if err := db.QueryRowContext(context.Background(), c.stmt).Scan(c.dst); err != nil {
			t.Fatal(err)
		}
	}
	made := int(load.done.Load())
	responsesBefore := 2*n + made
	if q.loadKeys != made || q.loadHot != made || q.oldHot != 0 || q.loadHot+q.archive != responsesBefore ||
		q.tombstones != 2*n || q.archive != 2*n || q.archiveOK != 2*n || q.dupClaims != 0 || q.dupKeys != 0 || q.orphans != 0 {
		t.Fatalf("after the sweeps: %+v; %d claims made by the load, %d expired records", q, made, 2*n)
	}
	t.Logf("responses: %d before (%d expired + %d made by the load) = %d still in their records + %d archived; no key archived twice",
		responsesBefore, 2*n, made, q.loadHot, q.archive)
}

// fillShipments inserts n shipments that succeeded two days ago, with
// their responses, in one statement.
func fillShipments(t *testing.T, db *sql.DB, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	_, err := db.ExecContext(ctx, `
INSERT INTO shipments (id, org, destination, weight_grams, label, created_at, idempotency_key, idempotency_status, idempotency_fingerprint,
	idempotency_response, idempotency_attempt, idempotency_lease_expires_at, idempotency_claimed_at, idempotency_completed_at)
SELECT gen_random_uuid(), 'org-' || (i % 50), 'Lyon', 100, 'attempt-1', now() - interval '2 days', $1 || i, 'succeeded',
	'v1:Mutation.createShipment:0123456789abcdef:0123456789abcdef', `+oldResponse("$1 || i")+`, 1,
	now() - interval '2 days' + interval '10 seconds', now() - interval '2 days' - i * interval '1 millisecond',
	now() - interval '2 days' - i * interval '1 millisecond'
FROM generate_series(1, $2) AS i`, prefix, n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ANALYZE shipments"); err != nil {
		t.Fatal(err)
	}
}

// oldResponse is the SQL of the stored response of the expired record with
// key k.
func oldResponse(k string) string {
	return `convert_to(format('{"v":1,"data":{"id":"%s","destination":"Lyon","weightGrams":100,"label":"attempt-1"}}', ` + k + `), 'UTF8')`
}

// sweep runs `idemctl -json sweep` in-process.
func sweep(t *testing.T, be *bench) sweepDoc {
	var out, errb bytes.Buffer
	code := idemctl.Command{Config: be.cliConfig()}.Run(context.Background(), []string{"-json", "sweep"}, &out, &errb)
	var doc sweepDoc
	if err := json.Unmarshal(out.Bytes(), &doc); code != idemctl.ExitOK || err != nil {
		t.Errorf("sweep: exit %d %v\n%s%s", code, err, out.String(), errb.String())
	}
	return doc
}

type claim struct {
	at   time.Time
	took time.Duration
}

type loadGen struct {
	cancel       context.CancelFunc
	wg           sync.WaitGroup
	mu           sync.Mutex
	results      []claim
	done         atomic.Int64
	failures     atomic.Int64
	firstFailure atomic.Value
	// paused stops new claims until it is false again.
	paused atomic.Bool
}

// startLoad makes new createShipment claims with fresh keys, workers at
// once, until stop.
func startLoad(t *testing.T, be *bench, workers int) *loadGen {
	ctx, cancel := context.WithCancel(context.Background())
	l := &loadGen{cancel: cancel}
	l.firstFailure.Store("")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers * 2}, Timeout: 30 * time.Second}
	t.Cleanup(cancel)
	for w := range workers {
		l.wg.Go(func() {
			var mine []claim
			for i := 0; ctx.Err() == nil; i++ {
				for l.paused.Load() && ctx.Err() == nil {
					time.Sleep(10 * time.Millisecond)
				}
				body, _ := json.Marshal(map[string]any{"query": testapp.CreateShipment, "variables": map[string]any{"k": fmt.Sprintf("load-%d-%d", w, i), "g": 100 + i%900}})
				req, _ := http.NewRequest(http.MethodPost, be.Server.URL, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Org", fmt.Sprintf("org-%d", i%50))
				at := time.Now()
				res, err := client.Do(req)
				var raw []byte
				if err == nil {
					raw, err = io.ReadAll(res.Body)
					res.Body.Close()
				}
				took := time.Since(at)
				var r *testkit.Response
				if err == nil {
					err = json.Unmarshal(raw, &r)
				}
				if err == nil && (len(r.Errors) > 0 || res.StatusCode != http.StatusOK) {
					err = fmt.Errorf("HTTP %d: %s", res.StatusCode, raw)
				}
				if err != nil {
					if l.failures.Add(1) == 1 {
						l.firstFailure.Store(err.Error())
					}
					continue
				}
				l.done.Add(1)
				mine = append(mine, claim{at, took})
			}
			l.mu.Lock()
			l.results = append(l.results, mine...)
			l.mu.Unlock()
		})
	}
	return l
}

func (l *loadGen) stop() []claim {
	l.cancel()
	l.wg.Wait()
	return l.results
}

func pct(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(q*float64(len(sorted)-1))]
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
