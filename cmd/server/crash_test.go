package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/example/provider"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// The article's hardest case, with real processes: a server is killed with
// SIGKILL while a payment is in the provider call, sometimes before the
// provider charged, sometimes after (money taken, books not written). After
// the lease runs out, a retry with the same key, sent to another server
// process, completes the payment: the provider shows one charge, the order
// is paid once, and every later retry replays that result.
//
// CRASH_TRIALS sets the number of trials per backend (default 6).
func TestKilledServerIsRecovered(t *testing.T) {
	trials := 6
	if n, err := strconv.Atoi(os.Getenv("CRASH_TRIALS")); err == nil && n > 0 {
		trials = n
	}
	bin := proctest.Build(t, ".")
	// Not idemtest.Kinds(): the server processes make their tables
	// themselves (ent's Schema.Create at start), which the partitioned
	// layout forbids (it would be undone), so PostgresPartitioned has no
	// meaning here; the in-process suites (graph, internal/testkit/testapp,
	// idemclient) cover it.
	for _, b := range []idemtest.Kind{idemtest.SQLite, idemtest.Postgres, idemtest.MariaDB} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			db := idemtest.Open(t, b)
			env, args := serverDatabase(db)
			providerDSN := db.DSN
			if b == idemtest.SQLite {
				providerDSN = strings.TrimSuffix(db.DSN, ".db") + "-provider.db"
			}
			const (
				lease   = time.Second
				latency = 150 * time.Millisecond
			)
			args = append(args, "-lease", lease.String(),
				"-provider-latency", latency.String(), "-provider-response-latency", latency.String())
			survivor := startServer(t, bin, env, args)
			prov := openLedger(t, providerDSN)

			afterCharge, late := 0, 0
			for i := 0; i < trials+late; i++ {
				if late > trials {
					t.Fatalf("%d of %d kills came after the victim had finished", late, i)
				}
				victim := startServer(t, bin, env, args)
				order := victim.newOrder(t, "acme", fmt.Sprintf("order-%d", i))
				key := fmt.Sprintf("pay-%d", i)

				// Kill the victim inside the provider call: in the latency
				// before the charge, or after it, in the answer's latency.
				// The call begins once the claim is committed, which is
				// waited for: a fixed delay after the request would be too
				// short on a loaded machine, the victim killed before it
				// claimed anything.
				go victim.pay("acme", key, order)
				waitClaimed(t, db, b, key)
				killAt := time.Duration(rand.Int64N(int64(latency * 7 / 5)))
				time.Sleep(killAt)
				victim.Kill(t)
				// The call takes 300 ms from the claim; a busy machine may
				// delay the kill past its end. The victim then finished the
				// payment: there is no crash to recover from, and the trial
				// is done again.
				if s := claimStatus(t, db, b, key); s != "pending" {
					late++
					t.Logf("trial %d: killed %v after its claim, the victim had finished (%s): not a crash", i, killAt, s)
					continue
				}
				charged := len(charges(t, prov, order)) == 1
				if charged {
					afterCharge++
				}

				// Retry on the survivor until the lease has run out.
				res := survivor.pay("acme", key, order)
				testkit.Eventually(t, func() bool {
					if res.code() != "IDEMPOTENCY_IN_PROGRESS" {
						return true
					}
					res = survivor.pay("acme", key, order)
					return false
				}, "trial %d: the retry past the victim's lease (%v)", i, lease)
				if len(res.Errors) > 0 {
					t.Fatalf("trial %d: retry after the crash: %s", i, res.body)
				}
				if !strings.Contains(res.body, `"paid":true`) || strings.Count(res.body, `"amount"`) != 2 {
					t.Fatalf("trial %d: result %s", i, res.body)
				}
				cs := charges(t, prov, order)
				if len(cs) != 1 {
					t.Fatalf("trial %d: %d provider charges, want 1", i, len(cs))
				}
				if again := survivor.pay("acme", key, order); !bytes.Equal(again.Data, res.Data) || again.code() != "" {
					t.Fatalf("trial %d: replay differs:\n%s\n%s", i, res.body, again.body)
				}
			}
			t.Logf("%s: %d trials, %d killed after the provider charged, all recovered with one charge (%d kills too late to count)", b, trials, afterCharge, late)
		})
	}
}

// waitClaimed waits until the payment claim of key is committed.
func waitClaimed(t *testing.T, db *idemtest.DB, b idemtest.Kind, key string) {
	t.Helper()
	q := `SELECT count(*) FROM payments WHERE idempotency_key = ?`
	if b.IsPostgres() {
		q = strings.ReplaceAll(q, "?", "$1")
	}
	testkit.Eventually(t, func() bool {
		var n int
		if err := db.Driver.DB().QueryRowContext(context.Background(), q, key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}, "a claim of %s", key)
}

// claimStatus returns the idempotency status of the payment of key.
func claimStatus(t *testing.T, db *idemtest.DB, b idemtest.Kind, key string) string {
	t.Helper()
	q := `SELECT idempotency_status FROM payments WHERE idempotency_key = ?`
	if b.IsPostgres() {
		q = strings.ReplaceAll(q, "?", "$1")
	}
	var s string
	if err := db.Driver.DB().QueryRowContext(context.Background(), q, key).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// serverProcess is a server started by startServer, with its GraphQL
// endpoint.
type serverProcess struct {
	*proctest.Process
	url string
}

// serverDatabase is how the server is given db: PostgreSQL and MariaDB
// by DATABASE_URL, a SQLite file by -db.
func serverDatabase(db *idemtest.DB) (env, args []string) {
	if db.Kind == idemtest.SQLite {
		return nil, []string{"-db", db.DSN}
	}
	return []string{"DATABASE_URL=" + db.DSN}, nil
}

// startServer starts the server binary on a free loopback port and returns
// once it accepts connections.
func startServer(t *testing.T, bin string, env, args []string) *serverProcess {
	t.Helper()
	addr := proctest.FreeAddr(t)
	p := proctest.Start(t, bin, env, append([]string{"-addr", addr}, args...))
	p.WaitListening(t, addr, testkit.WaitBound)
	return &serverProcess{Process: p, url: "http://" + addr + "/query"}
}

type gqlResult struct {
	body   string
	Data   json.RawMessage
	Errors []struct{ Extensions map[string]any }
}

func (r *gqlResult) code() string {
	if r == nil || len(r.Errors) == 0 {
		return ""
	}
	s, _ := r.Errors[0].Extensions["code"].(string)
	return s
}

func (p *serverProcess) do(tenant, query string, vars map[string]any) (*gqlResult, error) {
	return p.doContext(context.Background(), tenant, query, vars)
}

func (p *serverProcess) newOrder(t *testing.T, tenant, key string) string {
	t.Helper()
	r, err := p.do(tenant, `mutation($k: String!) { createOrder(idempotencyKey: $k, input: {amount: 4200, currency: "EUR"}) { id } }`, map[string]any{"k": key})
	if err != nil || len(r.Errors) > 0 {
		t.Fatalf("createOrder: %v %v", err, r)
	}
	var d struct{ CreateOrder struct{ ID string } }
	_ = json.Unmarshal(r.Data, &d)
	return d.CreateOrder.ID
}

func (p *serverProcess) pay(tenant, key, order string) *gqlResult {
	r, err := p.do(tenant, `mutation($k: String!, $o: ID!) { createPayment(idempotencyKey: $k, input: {orderID: $o, amount: 4200}) { id amount providerChargeID order { paid payments { id amount } } } }`,
		map[string]any{"k": key, "o": order})
	if err != nil {
		return &gqlResult{body: err.Error()}
	}
	return r
}

func openLedger(t *testing.T, dsn string) *provider.Simulated {
	t.Helper()
	name, source, d := idemdb.Resolve(dsn)
	db, err := sql.Open(name, source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// Its table, as the server's -migrate makes it (a no-op once made):
	// some tests read the ledger before the server has started.
	if err := provider.Migrate(context.Background(), db, d); err != nil {
		t.Fatal(err)
	}
	p, err := provider.NewSimulated(context.Background(), db, d)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func charges(t *testing.T, p *provider.Simulated, order string) []*provider.Charge {
	t.Helper()
	id, _ := strconv.Atoi(order)
	cs, err := p.Charges(context.Background(), "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// The same crash, and nobody retries: a server process with
// -recover-after finishes the killed server's payment by itself with its
// key. Half of the trials, the user pays meanwhile with a second key (as
// after an app crash): the recovery of the first key then finds the order
// paid, voids its charge and stores ORDER_ALREADY_PAID. In both, one live
// charge; the first key's late retry replays the outcome.
//
// The recovering process starts once the crash is set up (and the second
// key paid): the order of events is the test's, not a race between the
// second payment and the recoverer's schedule on a busy machine.
//
// RECOVER_TRIALS sets the number of trials per backend (default 4).
func TestKilledServerIsRecoveredWithoutRetry(t *testing.T) {
	trials := 4
	if n, err := strconv.Atoi(os.Getenv("RECOVER_TRIALS")); err == nil && n > 0 {
		trials = n
	}
	bin := proctest.Build(t, ".")
	for _, b := range []idemtest.Kind{idemtest.SQLite, idemtest.Postgres, idemtest.MariaDB} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			db := idemtest.Open(t, b)
			env, args := serverDatabase(db)
			providerDSN := db.DSN
			if b == idemtest.SQLite {
				providerDSN = strings.TrimSuffix(db.DSN, ".db") + "-provider.db"
			}
			args = append(args, "-lease", "1s", "-provider-response-latency", "2s")
			recovering := append(slices.Clip(args), "-recover-after", "1s")
			survivor := startServer(t, bin, env, args)
			prov := openLedger(t, providerDSN)

			var noRetry, secondKey, late int
			for i := 0; i < trials+late; i++ {
				if late > trials {
					t.Fatalf("%d of %d kills came after the victim had finished", late, i)
				}
				victim := startServer(t, bin, env, args)
				order := victim.newOrder(t, "acme", fmt.Sprintf("order-%d", i))
				k1, k2 := fmt.Sprintf("pay-%d", i), fmt.Sprintf("pay-%d-again", i)

				// Kill the victim once the provider has charged, in the
				// latency of its answer (2 s; a busy machine may delay the
				// kill past it: the victim then finished the payment, and
				// the trial is done again).
				go victim.pay("acme", k1, order)
				testkit.Eventually(t, func() bool { return len(charges(t, prov, order)) > 0 }, "trial %d: the provider charged", i)
				victim.Kill(t)
				if s := claimStatus(t, db, b, k1); s != "pending" {
					late++
					t.Logf("trial %d: the victim had finished (%s) when the kill came: not a crash", i, s)
					continue
				}

				if i%2 == 1 {
					secondKey++
					if r := survivor.pay("acme", k2, order); len(r.Errors) > 0 || !strings.Contains(r.body, `"paid":true`) {
						t.Fatalf("trial %d: payment with a second key: %s", i, r.body)
					}
					// The recovery of k1 voids its charge.
					recoverer := startServer(t, bin, env, recovering)
					testkit.Eventually(t, func() bool {
						c := chargeOf(t, prov, order, k1)
						return c != nil && c.Voided
					}, "trial %d: %s's charge voided", i, k1)
					// The charge is voided before the recovery stores its
					// outcome: a retry in between is told the key is in
					// progress, and comes back, as a client does.
					var r *gqlResult
					testkit.Eventually(t, func() bool {
						r = survivor.pay("acme", k1, order)
						return r.code() != "IDEMPOTENCY_IN_PROGRESS"
					}, "trial %d: %s's outcome stored", i, k1)
					if r.code() != "ORDER_ALREADY_PAID" || !strings.Contains(r.body, `"replayed":true`) {
						t.Fatalf("trial %d: %s's late retry: %s", i, k1, r.body)
					}
					recoverer.Kill(t)
				} else {
					noRetry++
					recoverer := startServer(t, bin, env, recovering)
					testkit.Eventually(t, func() bool { return survivor.paid(t, order) }, "trial %d: the order paid", i)
					// Paid in the transaction that stores the outcome.
					r := survivor.pay("acme", k1, order)
					if len(r.Errors) > 0 || !strings.Contains(r.body, `"replayed":true`) || strings.Count(r.body, `"amount"`) != 2 {
						t.Fatalf("trial %d: %s's late retry: %s", i, k1, r.body)
					}
					recoverer.Kill(t)
				}
				live := 0
				for _, c := range charges(t, prov, order) {
					if !c.Voided {
						live++
					}
				}
				if live != 1 {
					t.Fatalf("trial %d: %d live charges, want 1: %+v", i, live, charges(t, prov, order))
				}
			}
			t.Logf("%s: %d crashes after the charge with no retry, %d with a second key: every one final, one live charge (%d kills too late to count)", b, noRetry, secondKey, late)
		})
	}
}

// paid reports whether the order is paid.
func (p *serverProcess) paid(t *testing.T, order string) bool {
	t.Helper()
	r, err := p.do("acme", `query($id: ID!) { order(id: $id) { paid } }`, map[string]any{"id": order})
	if err != nil || len(r.Errors) > 0 {
		t.Fatalf("order: %v %v", err, r)
	}
	return strings.Contains(r.body, `"paid":true`)
}

// chargeOf returns the provider's charge of order with key (nil if none).
func chargeOf(t *testing.T, p *provider.Simulated, order, key string) *provider.Charge {
	t.Helper()
	for _, c := range charges(t, p, order) {
		if c.IdempotencyKey == key {
			return c
		}
	}
	return nil
}
