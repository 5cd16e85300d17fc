package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// A sweeper killed with SIGKILL in the middle of its work, again and
// again, loses no record and duplicates none: the real cmd/idemctl binary
// sweeps a table of expired records (batches of 100), is killed at a
// random moment once it has archived something (PostgreSQL: most kills
// land while a batch's transaction is open, which the test checks in
// pg_stat_activity), restarted, killed, ten times; then a run finishes. After every kill, and at the end: every response that existed
// before is, byte for byte, either still in its record or in the archive,
// never both and never neither; every tombstone has its archive row; no key
// is in the archive twice.
//
// KILL_SWEEP_ROWS sets the number of expired records (default 20,000).
func TestKilledSweeperLosesNothing(t *testing.T) {
	bin := proctest.Build(t, ".")
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		db := idemtest.Open(t, b)
		client := ent.NewClient(ent.Driver(db.Driver))
		testkit.Setup(t, db, client.IdempotencyBackend(), client.Schema.Create)
		n := 20_000
		if v, err := strconv.Atoi(os.Getenv("KILL_SWEEP_ROWS")); err == nil && v > 0 {
			n = v
		}
		conn := db.Driver.DB()
		start := time.Now()
		fillOrders(t, conn, b, n)
		fresh := 10 // records inside their retention window: never swept
		fillFresh(t, conn, b, fresh)
		t.Logf("%s: %d expired records inserted in %v", b, n, time.Since(start).Round(time.Millisecond))
		before := snapshot(t, conn)
		if before.count != n+fresh {
			t.Fatalf("%d responses before, want %d", before.count, n+fresh)
		}

		app := fmt.Sprintf("idemctl-sweep-test-%d", rand.Int64())
		env, global := []string{}, []string{}
		if b.IsPostgres() {
			u, _ := url.Parse(db.DSN)
			q := u.Query()
			q.Set("application_name", app)
			u.RawQuery = q.Encode()
			env = append(env, "DATABASE_URL="+u.String())
		} else if b == idemtest.MariaDB {
			env = append(env, "DATABASE_URL="+db.DSN)
		} else {
			global = append(global, "-db", db.DSN)
		}
		args := append(slices.Clip(global), "sweep", "-batch", "100")

		// Kill every run once it has archived something, a random
		// moment later, until `kills` runs died; then let one finish.
		const wantKills = 10
		var kills, midBatch, runs, archivedSoFar int
		var run *proctest.Process
		sweepStart := time.Now()
		for done := false; !done; {
			runs++
			run = proctest.Start(t, bin, env, args)
			if kills == wantKills {
				if err := run.Wait(); err != nil {
					t.Fatalf("idemctl sweep: %v\n%s", err, run.Output())
				}
				break
			}
			// Wait until it has committed a batch (it is past its start
			// and at work), then a moment more: 0 to 3 batches' time.
			for deadline := time.Now().Add(testkit.WaitBound); archiveRows(t, conn) == archivedSoFar; time.Sleep(2 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("run %d archived nothing in %v:\n%s", runs, testkit.WaitBound, run.Output())
				}
				if run.Exited() {
					break
				}
			}
			time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond)
			select {
			case <-run.Done():
				// It finished before the kill: the records ran out.
				if err := run.Wait(); err != nil {
					t.Fatalf("idemctl sweep: %v\n%s", err, run.Output())
				}
				done = true
			default:
				if b.IsPostgres() && inTransaction(t, conn, app) {
					midBatch++
				}
				if run.Kill(t) {
					kills++
				} else if run.Wait() == nil {
					done = true // it finished just before the signal
				}
				if b.IsPostgres() {
					waitGone(t, conn, app) // the server rolls the killed batch back
				}
				archivedSoFar = check(t, conn, before, n+fresh, "after a kill").archived
			}
		}
		elapsed := time.Since(sweepStart)
		if kills < wantKills {
			t.Fatalf("only %d kills before the sweep finished: more rows needed (KILL_SWEEP_ROWS)", kills)
		}
		if b.IsPostgres() && midBatch == 0 {
			t.Fatalf("none of %d kills landed in a batch's transaction", kills)
		}
		after := check(t, conn, before, n+fresh, "at the end")
		if after.hot != fresh || after.archived != n {
			t.Fatalf("at the end: %d responses still in their records, %d archived; want %d and %d", after.hot, after.archived, fresh, n)
		}
		inside := "not observable on " + string(b)
		if b.IsPostgres() {
			inside = fmt.Sprintf("%d of them inside a batch's transaction per pg_stat_activity", midBatch)
		}
		t.Logf("%s: %d runs, %d killed with SIGKILL (%s), %d records archived in %v; last run:\n%s",
			b, runs, kills, inside, n, elapsed.Round(time.Millisecond), run.Output())

		// Nothing left: a new sweep archives nothing, and stats agrees.
		res := runIdemctl(t, bin, env, append(slices.Clip(global), "-json", "sweep"))
		var sw struct{ Archived, Purged int }
		if err := json.Unmarshal([]byte(res), &sw); err != nil || sw.Archived != 0 || sw.Purged != 0 {
			t.Fatalf("a last sweep: %v\n%s", err, res)
		}
		res = runIdemctl(t, bin, env, append(slices.Clip(global), "-json", "stats"))
		var st struct {
			Tables []struct {
				Entity                string
				Succeeded, Tombstones int
			}
			ArchivedRecords int
		}
		if err := json.Unmarshal([]byte(res), &st); err != nil || st.ArchivedRecords != n {
			t.Fatalf("stats: %v\n%s", err, res)
		}
		for _, ts := range st.Tables {
			if ts.Entity == "Order" && (ts.Tombstones != n || ts.Succeeded != fresh) {
				t.Fatalf("stats: orders %+v", ts)
			}
		}
	})
}

// fillOrders inserts n orders that succeeded two days ago, with a response
// each, as the hook leaves them: PostgreSQL with one generate_series
// statement, SQLite in one transaction.
func fillOrders(t *testing.T, db *sql.DB, b idemtest.Kind, n int) {
	t.Helper()
	ctx := context.Background()
	if b.IsPostgres() {
		_, err := db.ExecContext(ctx, `
INSERT INTO orders (tenant_id, idempotency_key, idempotency_status, idempotency_fingerprint, idempotency_response,
	idempotency_attempt, idempotency_lease_expires_at, idempotency_claimed_at, idempotency_completed_at, amount, currency, paid)
SELECT 'tenant-' || (i % 7), 'order-' || i, 'succeeded', 'v1:Mutation.createOrder:0123456789abcdef:0123456789abcdef',
	convert_to(format('{"v":1,"data":{"id":"%s","amount":%s,"currency":"EUR","paid":false}}', i, i), 'UTF8'),
	1, now() - interval '2 days' + interval '30 seconds', now() - interval '2 days' - i * interval '1 millisecond',
	now() - interval '2 days' - i * interval '1 millisecond', i, 'EUR', false
FROM generate_series(1, $1) AS i`, n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "ANALYZE orders"); err != nil {
			t.Fatal(err)
		}
		return
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO orders (tenant_id, idempotency_key, idempotency_status, idempotency_fingerprint, idempotency_response,
	idempotency_attempt, idempotency_lease_expires_at, idempotency_claimed_at, idempotency_completed_at, amount, currency, paid)
	VALUES (?, ?, 'succeeded', 'v1:Mutation.createOrder:0123456789abcdef:0123456789abcdef', ?, 1, ?, ?, ?, ?, 'EUR', false)`)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().UTC().Add(-48 * time.Hour)
	for i := 1; i <= n; i++ {
		at := base.Add(-time.Duration(i) * time.Millisecond)
		resp := fmt.Sprintf(`{"v":1,"data":{"id":"%d","amount":%d,"currency":"EUR","paid":false}}`, i, i)
		if _, err := stmt.ExecContext(ctx, "tenant-"+strconv.Itoa(i%7), "order-"+strconv.Itoa(i), []byte(resp), at.Add(30*time.Second), at, at, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// fillFresh inserts orders completed a minute ago.
func fillFresh(t *testing.T, db *sql.DB, b idemtest.Kind, n int) {
	t.Helper()
	ctx := context.Background()
	at := time.Now().UTC().Add(-time.Minute)
	for i := range n {
		q := `INSERT INTO orders (tenant_id, idempotency_key, idempotency_status, idempotency_fingerprint, idempotency_response,
	idempotency_attempt, idempotency_lease_expires_at, idempotency_claimed_at, idempotency_completed_at, amount, currency, paid)
	VALUES ($1, $2, 'succeeded', 'v1:Mutation.createOrder:0123456789abcdef:0123456789abcdef', $3, 1, $4, $5, $5, 1, 'EUR', false)`
		args := []any{"tenant-fresh", "fresh-" + strconv.Itoa(i), []byte(`{"v":1,"data":{"id":"fresh"}}`), at.Add(30 * time.Second), at}
		switch {
		case b == idemtest.MariaDB: // positional placeholders only
			q = regexp.MustCompile(`\$[0-9]`).ReplaceAllString(q, "?")
			args = append(args, at)
		case !b.IsPostgres():
			q = strings.ReplaceAll(q, "$", "?")
		}
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
}

// state is what the test knows of every response.
type state struct {
	count, hot, archived int
	digest               string
}

// snapshot reads every response of orders, in its record or in the
// archive, in (tenant, key) order, and digests them; it fails on a key
// that is in both places or twice in the archive.
func snapshot(t *testing.T, db *sql.DB) state {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `
SELECT tenant_id, idempotency_key, idempotency_response, 0 FROM orders WHERE idempotency_response IS NOT NULL
UNION ALL
SELECT tenant_id, idempotency_key, idempotency_response, 1 FROM idempotency_archives WHERE record_table = 'orders'
ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	h := sha256.New()
	var s state
	var prevTenant, prevKey string
	for rows.Next() {
		var tenant, key string
		var resp []byte
		var archived int
		if err := rows.Scan(&tenant, &key, &resp, &archived); err != nil {
			t.Fatal(err)
		}
		if tenant == prevTenant && key == prevKey {
			t.Fatalf("the response of %s/%s is there twice (in its record and the archive, or twice in the archive)", tenant, key)
		}
		prevTenant, prevKey = tenant, key
		s.count++
		if archived == 1 {
			s.archived++
		} else {
			s.hot++
		}
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00", tenant, key, len(resp))
		h.Write(resp)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	s.digest = hex.EncodeToString(h.Sum(nil))
	return s
}

// check compares the responses with those before the sweep, and checks
// the tombstones against the archive (in Go: the planner's estimates of
// tables that a sweep is changing make such joins slow).
func check(t *testing.T, db *sql.DB, before state, want int, when string) state {
	t.Helper()
	s := snapshot(t, db)
	if s.count != want || s.digest != before.digest {
		t.Fatalf("%s: %d responses (%d in records, %d archived), want the %d of before, byte for byte (digest %s, before %s)",
			when, s.count, s.hot, s.archived, want, s.digest[:12], before.digest[:12])
	}
	type key struct{ tenant, key string }
	tombstones := map[key]bool{} // the tombstone still holds a response
	rows, err := db.QueryContext(context.Background(),
		"SELECT tenant_id, idempotency_key, idempotency_response IS NOT NULL FROM orders WHERE idempotency_archived_at IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k key
		var holds bool
		if err := rows.Scan(&k.tenant, &k.key, &holds); err != nil {
			t.Fatal(err)
		}
		tombstones[k] = holds
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	archived := map[key]int{}
	rows, err = db.QueryContext(context.Background(), "SELECT tenant_id, idempotency_key FROM idempotency_archives WHERE record_table = 'orders'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.tenant, &k.key); err != nil {
			t.Fatal(err)
		}
		archived[k]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	for k, holds := range tombstones {
		switch {
		case holds:
			t.Fatalf("%s: the tombstone of %v kept its response", when, k)
		case archived[k] == 0:
			t.Fatalf("%s: the tombstone of %v has no archive row", when, k)
		}
	}
	for k, n := range archived {
		switch {
		case n > 1:
			t.Fatalf("%s: %v is in the archive %d times", when, k, n)
		case !func() bool { _, ok := tombstones[k]; return ok }():
			t.Fatalf("%s: %v is in the archive but its record is no tombstone", when, k)
		}
	}
	if len(tombstones) != s.archived {
		t.Fatalf("%s: %d tombstones, %d archived responses", when, len(tombstones), s.archived)
	}
	return s
}

// archiveRows counts the archive's rows.
func archiveRows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM idempotency_archives").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// inTransaction reports whether the sweeper's connection has a transaction
// open right now.
func inTransaction(t *testing.T, db *sql.DB, app string) bool {
	t.Helper()
	var n int
	err := db.QueryRowContext(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND xact_start IS NOT NULL AND state <> 'idle'", app).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// waitGone waits until the server has noticed that the killed sweeper's
// connections are gone (and rolled back their transaction).
func waitGone(t *testing.T, db *sql.DB, app string) {
	t.Helper()
	testkit.Eventually(t, func() bool {
		var n int
		if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	}, "the killed sweeper's connections closed")
}

func runIdemctl(t *testing.T, bin string, env, args []string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("idemctl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}
