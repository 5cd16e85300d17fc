package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/example/provider"
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
	// Not idemtest.Backends(): the server processes make their tables
	// themselves (ent's Schema.Create at start), which the partitioned
	// layout forbids (it would be undone), so PostgresPartitioned has no
	// meaning here; the in-process suites (graph, internal/testkit/testapp,
	// idemclient) cover it.
	for _, b := range []idemtest.Backend{idemtest.SQLite, idemtest.Postgres} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			db := idemtest.Open(t, b)
			env, args := []string{}, []string{}
			providerDSN := db.DSN
			if b == idemtest.Postgres {
				env = append(env, "DATABASE_URL="+db.DSN)
			} else {
				args = append(args, "-db", db.DSN)
				providerDSN = strings.TrimSuffix(db.DSN, ".db") + "-provider.db"
			}
			const (
				lease   = time.Second
				latency = 150 * time.Millisecond
			)
			args = append(args, "-lease", lease.String(),
				"-provider-latency", latency.String(), "-provider-response-latency", latency.String())
			survivor := startServer(t, bin, env, args)
			prov := openLedger(t, providerDSN, b == idemtest.Postgres)

			afterCharge := 0
			for i := range trials {
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
				charged := len(charges(t, prov, order)) == 1
				if charged {
					afterCharge++
				}

				// Retry on the survivor until the lease has run out. The first
				// retry must find the claim pending: the victim died mid-call.
				res := survivor.pay("acme", key, order)
				if res.code() != "IDEMPOTENCY_IN_PROGRESS" {
					t.Fatalf("trial %d: the victim was not killed mid-call (killed %v after its claim): %s", i, killAt, res.body)
				}
				for deadline := time.Now().Add(10 * lease); res.code() == "IDEMPOTENCY_IN_PROGRESS" && time.Now().Before(deadline); {
					time.Sleep(100 * time.Millisecond)
					res = survivor.pay("acme", key, order)
				}
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
			t.Logf("%s: %d trials, %d killed after the provider charged, all recovered with one charge", b, trials, afterCharge)
		})
	}
}

// waitClaimed waits until the payment claim of key is committed.
func waitClaimed(t *testing.T, db *idemtest.DB, b idemtest.Backend, key string) {
	t.Helper()
	q := `SELECT count(*) FROM payments WHERE idempotency_key = ?`
	if b.IsPostgres() {
		q = strings.ReplaceAll(q, "?", "$1")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		var n int
		if err := db.Driver.DB().QueryRowContext(context.Background(), q, key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no claim of %s after 10s", key)
		}
	}
}

// serverProcess is a server started by startServer, with its GraphQL
// endpoint.
type serverProcess struct {
	*proctest.Process
	url string
}

// startServer starts the server binary on a free loopback port and returns
// once it accepts connections.
func startServer(t *testing.T, bin string, env, args []string) *serverProcess {
	t.Helper()
	addr := proctest.FreeAddr(t)
	p := proctest.Start(t, bin, env, append([]string{"-addr", addr}, args...))
	p.WaitListening(t, addr, 15*time.Second)
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
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, p.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant-ID", tenant)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(res.Body); err != nil {
		return nil, err
	}
	r := &gqlResult{body: buf.String()}
	return r, json.Unmarshal(buf.Bytes(), r)
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

func openLedger(t *testing.T, dsn string, postgres bool) *provider.Simulated {
	t.Helper()
	name, source, _ := idemdb.Resolve(dsn)
	db, err := sql.Open(name, source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p, err := provider.NewSimulated(context.Background(), db, postgres)
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

// The same crash, and nobody retries: the server processes run with
// -recover-after, and one of them finishes the killed server's payment by
// itself with its key. Half of the trials, the user pays meanwhile with a
// second key (as after an app crash): the recovery of the first key then
// finds the order paid, voids its charge and stores ORDER_ALREADY_PAID. In
// both, one live charge; the first key's late retry replays the outcome.
//
// RECOVER_TRIALS sets the number of trials per backend (default 4).
func TestKilledServerIsRecoveredWithoutRetry(t *testing.T) {
	trials := 4
	if n, err := strconv.Atoi(os.Getenv("RECOVER_TRIALS")); err == nil && n > 0 {
		trials = n
	}
	bin := proctest.Build(t, ".")
	for _, b := range []idemtest.Backend{idemtest.SQLite, idemtest.Postgres} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			db := idemtest.Open(t, b)
			env, args := []string{}, []string{}
			providerDSN := db.DSN
			if b == idemtest.Postgres {
				env = append(env, "DATABASE_URL="+db.DSN)
			} else {
				args = append(args, "-db", db.DSN)
				providerDSN = strings.TrimSuffix(db.DSN, ".db") + "-provider.db"
			}
			args = append(args, "-lease", "1s", "-recover-after", "1s", "-provider-response-latency", "2s")
			survivor := startServer(t, bin, env, args)
			prov := openLedger(t, providerDSN, b == idemtest.Postgres)

			var noRetry, secondKey int
			for i := range trials {
				victim := startServer(t, bin, env, args)
				order := victim.newOrder(t, "acme", fmt.Sprintf("order-%d", i))
				k1, k2 := fmt.Sprintf("pay-%d", i), fmt.Sprintf("pay-%d-again", i)

				// Kill the victim once the provider has charged, in the
				// latency of its answer.
				go victim.pay("acme", k1, order)
				for deadline := time.Now().Add(10 * time.Second); len(charges(t, prov, order)) == 0; time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("trial %d: the provider never charged", i)
					}
				}
				victim.Kill(t)

				if i%2 == 1 {
					// The second key's payment starts at once; k1's
					// recovery, 2 s after its claim at the earliest
					// (lease and -recover-after): the second key's
					// provider answer (2 s) comes first by a margin.
					secondKey++
					if r := survivor.pay("acme", k2, order); len(r.Errors) > 0 || !strings.Contains(r.body, `"paid":true`) {
						t.Fatalf("trial %d: payment with a second key: %s", i, r.body)
					}
					// The recovery of k1 voids its charge.
					for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
						if c := chargeOf(t, prov, order, k1); c != nil && c.Voided {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("trial %d: %s's charge never voided: %+v", i, k1, charges(t, prov, order))
						}
					}
					// The charge is voided before the recovery stores its
					// outcome: a retry in between is told the key is in
					// progress, and comes back, as a client does.
					r := survivor.pay("acme", k1, order)
					for deadline := time.Now().Add(15 * time.Second); r.code() == "IDEMPOTENCY_IN_PROGRESS" && time.Now().Before(deadline); r = survivor.pay("acme", k1, order) {
						time.Sleep(100 * time.Millisecond)
					}
					if r.code() != "ORDER_ALREADY_PAID" || !strings.Contains(r.body, `"replayed":true`) {
						t.Fatalf("trial %d: %s's late retry: %s", i, k1, r.body)
					}
				} else {
					noRetry++
					for deadline := time.Now().Add(15 * time.Second); !survivor.paid(t, order); time.Sleep(50 * time.Millisecond) {
						if time.Now().After(deadline) {
							t.Fatalf("trial %d: the order was never paid", i)
						}
					}
					r := survivor.pay("acme", k1, order)
					if len(r.Errors) > 0 || !strings.Contains(r.body, `"replayed":true`) || strings.Count(r.body, `"amount"`) != 2 {
						t.Fatalf("trial %d: %s's late retry: %s", i, k1, r.body)
					}
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
			t.Logf("%s: %d crashes after the charge with no retry, %d with a second key: every one final, one live charge", b, noRetry, secondKey)
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
