package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/pgcluster"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// A failover loses nothing on a synchronous standby. The example server
// runs on the pair's two-host URL (target_session_attrs=read-write); six
// clients send keyed orders, each followed by its payment, and retry every
// key until a final answer. The standby falls behind (the primary's WAL
// sender stopped: commits wait for it), then every process of the primary
// is killed and the standby promoted. The same server, not restarted,
// follows the new primary; afterwards every key is sent once more and must
// replay the first final answer its client received, every acknowledged
// order must exist, and the provider must hold at most one live charge per
// order, each with its payment. The server says at start whether the
// replication keeps the promise (log and gauge), and idemctl works on the
// same URL.
//
// FAILOVER_REPLICATION=asynchronous runs the same with an asynchronous
// standby, where the commits acknowledged while it lagged are lost: the
// test then reports what was lost and fails if nothing was (the checks
// would have no teeth).
//
// PostgreSQL only: the replicated pair is PostgreSQL's (pgcluster);
// MariaDB's replication is not part of the test kit.
func TestFailoverLosesNothing(t *testing.T) {
	mode := pgcluster.Synchronous
	if os.Getenv("FAILOVER_REPLICATION") == "asynchronous" {
		mode = pgcluster.Asynchronous
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pair, env, srv, metricsAddr := startOnPair(t, ctx, mode)
	idemctlBin := proctest.Build(t, "../idemctl")

	run := &failoverRun{srv: srv, first: map[string]json.RawMessage{}, orders: map[string]string{}}
	stopCh := make(chan struct{})
	stop := sync.OnceFunc(func() { close(stopCh) })
	var clients sync.WaitGroup
	t.Cleanup(func() { stop(); clients.Wait() }) // also when the test fails early
	for c := range 6 {
		clients.Go(func() { run.client(t, c, stopCh) })
	}
	lagged, took := run.failover(t, ctx, pair)
	failed := run.finals.Load()
	// The server follows the new primary without a restart.
	testkit.Eventually(t, func() bool { return run.finals.Load() >= failed+30 }, "30 answers after the failover")
	stop()
	clients.Wait()
	if srv.Exited() {
		t.Fatalf("the server exited:\n%s", srv.Output())
	}
	lost := run.audit(t, pair.URL("postgres"))
	// The promoted standby runs alone: nothing it acknowledges now is
	// anywhere else.
	if v := replicationGauge(t, metricsAddr); v != "0" {
		t.Errorf("after the failover, the promoted standby alone: idem_replication_synchronous is %q, want 0", v)
	}
	// idemctl on the same two-host URL reaches the new primary, and says
	// it runs without a synchronous standby.
	ctl := proctest.Start(t, idemctlBin, env, []string{"stats"})
	if err := ctl.Wait(); err != nil || !strings.Contains(ctl.Output(), "Replication: NOT synchronous: no synchronous standby") {
		t.Errorf("idemctl stats after the failover: %v\n%s", err, ctl.Output())
	}
	for why, body := range run.examples {
		t.Logf("retried (%s): %s", why, body)
	}
	t.Logf("%s standby: %d intents answered (%d while the standby lagged), promoted in %v, %d retryable answers (%v); after the failover: %s",
		mode, run.finals.Load(), lagged, took.Round(time.Millisecond), run.retries.Load(), run.retryKinds(), lost)
	switch {
	case mode == pgcluster.Synchronous && lost.total() > 0:
		t.Errorf("a synchronous standby lost what was acknowledged: %s", lost)
	case mode == pgcluster.Asynchronous && lost.total() == 0:
		t.Errorf("an asynchronous standby promoted while it lagged by %d answers lost nothing: the checks do not see a loss", lagged)
	}
}

// startOnPair starts a primary and a standby replicated in mode, and the
// example server on their two-host URL with its metrics at metricsAddr;
// it checks that the server said at start (log and gauge) whether a
// failover keeps every answer.
func startOnPair(t *testing.T, ctx context.Context, mode pgcluster.Replication) (pair *pgcluster.Pair, env []string, srv *serverProcess, metricsAddr string) {
	t.Helper()
	pair, err := pgcluster.NewPair(ctx, mode, pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pair.Remove(); err != nil {
			t.Error(err)
		}
	})
	bin := proctest.Build(t, ".")
	env = []string{"DATABASE_URL=" + pair.URL("postgres")}
	metricsAddr = proctest.FreeAddr(t)
	srv = startServer(t, bin, env, []string{"-lease", "2s", "-recover-after", "2s", "-materialize-every", "0",
		"-river-poll-interval", "200ms", "-river-rescue-after", "4s", "-metrics-addr", metricsAddr})
	synchronous := map[pgcluster.Replication]string{pgcluster.Synchronous: "1", pgcluster.Asynchronous: "0"}[mode]
	testkit.Eventually(t, func() bool { return strings.Contains(srv.Output(), "PostgreSQL replication") }, "the replication logged at start")
	if said := strings.Contains(srv.Output(), "PostgreSQL replication is synchronous"); said != (mode == pgcluster.Synchronous) {
		t.Errorf("%s standby, logged at start:\n%s", mode, srv.Output())
	}
	if v := replicationGauge(t, metricsAddr); v != synchronous {
		t.Errorf("%s standby: idem_replication_synchronous is %q, want %s", mode, v, synchronous)
	}
	return pair, env, srv, metricsAddr
}

// failover waits for some answers, makes the standby lag, and fails the
// primary over to it while the lag matters: a synchronous standby once
// several commits wait for it (the kill interrupts them), an asynchronous
// one once 20 answers were acknowledged that it never received. It
// returns those answers and how long the promotion took.
func (r *failoverRun) failover(t *testing.T, ctx context.Context, pair *pgcluster.Pair) (lagged int64, took time.Duration) {
	t.Helper()
	testkit.Eventually(t, func() bool { return r.finals.Load() >= 30 }, "30 answers before the failover")
	resume, err := pair.HoldWAL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resume() })
	held := r.finals.Load()
	if pair.Mode == pgcluster.Synchronous {
		testkit.Eventually(t, func() bool { return syncRepWaiters(t, pair.Primary.URL("postgres")) >= 3 }, "commits waiting for the standby")
	} else {
		testkit.Eventually(t, func() bool { return r.finals.Load() >= held+20 }, "20 answers while the standby lags")
	}
	lagged = r.finals.Load() - held
	if took, err = pair.Fail(ctx); err != nil {
		t.Fatal(err)
	}
	return lagged, took
}

// failoverRun is the clients' record: the first final answer to each key,
// and each acknowledged order's id.
type failoverRun struct {
	srv              *serverProcess
	mu               sync.Mutex
	first            map[string]json.RawMessage // key → data of its first final answer
	orders           map[string]string          // order key → order id
	kinds            map[string]int             // why attempts were retried
	examples         map[string]string          // an answer of each kind
	finals, retries  atomic.Int64
	unexpectedFinals []string
}

// client creates an order and pays it, key after key, until stop.
func (r *failoverRun) client(t *testing.T, c int, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		okey, pkey := fmt.Sprintf("o-%d-%d", c, i), fmt.Sprintf("p-%d-%d", c, i)
		data := r.final(okey, `mutation($k: String!) { createOrder(idempotencyKey: $k, input: {amount: 4200, currency: "EUR"}) { id } }`, map[string]any{"k": okey})
		var d struct{ CreateOrder struct{ ID string } }
		if json.Unmarshal(data, &d) != nil || d.CreateOrder.ID == "" {
			continue // reported by final
		}
		r.mu.Lock()
		r.orders[okey] = d.CreateOrder.ID
		r.mu.Unlock()
		r.final(pkey, payMutation, map[string]any{"k": pkey, "o": d.CreateOrder.ID})
	}
}

// final sends the request until it gets a final answer, records the
// answer's data as the key's first, and returns it.
func (r *failoverRun) final(key, query string, vars map[string]any) json.RawMessage {
	for {
		res, err := r.srv.do("acme", query, vars)
		why := retryable(res, err)
		if why == "" {
			r.finals.Add(1)
			r.mu.Lock()
			r.first[key] = res.Data
			if len(res.Errors) > 0 {
				r.unexpectedFinals = append(r.unexpectedFinals, key+": "+res.body)
			}
			r.mu.Unlock()
			return res.Data
		}
		r.retries.Add(1)
		r.mu.Lock()
		if r.kinds == nil {
			r.kinds, r.examples = map[string]int{}, map[string]string{}
		}
		r.kinds[why]++
		if res != nil && r.examples[why] == "" {
			r.examples[why] = res.body
		}
		r.mu.Unlock()
		time.Sleep(50 * time.Millisecond) // a client's pause between retries, not a wait for a condition
	}
}

// retryable says why an answer is not final ("" when it is): no answer, or
// a code that idemcode classifies as retryable.
func retryable(res *gqlResult, err error) string {
	if err != nil {
		return "no answer"
	}
	if c := idemcode.Code(res.code()); c != "" && c.Retryable() {
		return string(c)
	}
	return ""
}

func (r *failoverRun) retryKinds() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.kinds
}

// losses are what an audit after the failover found.
type losses struct {
	changed, ordersGone, doubleCharges, chargesWithoutPayment, errors int
}

func (l losses) total() int {
	return l.changed + l.ordersGone + l.doubleCharges + l.chargesWithoutPayment + l.errors
}

func (l losses) String() string {
	return fmt.Sprintf("%d replays differing from the first answer, %d acknowledged orders gone, %d orders charged twice, %d live charges without their payment, %d final errors",
		l.changed, l.ordersGone, l.doubleCharges, l.chargesWithoutPayment, l.errors)
}

// audit replays every key once and reads the new primary.
func (r *failoverRun) audit(t *testing.T, url string) losses {
	t.Helper()
	var l losses
	l.errors = len(r.unexpectedFinals)
	for _, e := range r.unexpectedFinals {
		t.Logf("final error: %s", e)
	}
	for key, data := range r.first {
		query, vars := `mutation($k: String!) { createOrder(idempotencyKey: $k, input: {amount: 4200, currency: "EUR"}) { id } }`, map[string]any{"k": key}
		if key[0] == 'p' {
			// The payment's order is the one its client's order key got.
			query, vars = payMutation, map[string]any{"k": key, "o": r.orders["o"+key[1:]]}
		}
		var again json.RawMessage
		testkit.Eventually(t, func() bool {
			res, err := r.srv.do("acme", query, vars)
			if retryable(res, err) != "" {
				return false
			}
			again = res.Data
			return true
		}, "a final answer to the replay of %s", key)
		if !bytes.Equal(again, data) {
			l.changed++
			if l.changed <= 3 {
				t.Logf("%s: first %s, now %s", key, data, again)
			}
		}
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, id := range r.orders {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM orders WHERE id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			l.ordersGone++
		}
	}
	scalar := func(q string) int {
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	l.doubleCharges = scalar(`SELECT count(*) FROM (SELECT order_id FROM provider_charges WHERE NOT voided GROUP BY tenant, order_id HAVING count(*) > 1) d`)
	l.chargesWithoutPayment = scalar(`SELECT count(*) FROM provider_charges c WHERE NOT voided AND NOT EXISTS
		(SELECT 1 FROM payments p WHERE p.tenant_id = c.tenant AND p.idempotency_key = c.idempotency_key AND p.idempotency_status = 'succeeded')`)
	return l
}

// syncRepWaiters counts the primary's backends whose commit waits for the
// synchronous standby.
func syncRepWaiters(t *testing.T, url string) int {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// replicationGauge reads idem_replication_synchronous from the server's
// metrics.
func replicationGauge(t *testing.T, addr string) string {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	v, _ := sample(string(body), `idem_replication_synchronous{`)
	return v
}
