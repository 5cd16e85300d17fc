package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/example/mailer"
	"github.com/goovo/idem/internal/example/provider"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// A client that hangs up does not cancel its intent: the server, on its
// default settings, is sent a payment whose provider call takes 2 s, and
// the client closes its connection as soon as the claim is committed, in
// the provider call. Nobody retries. The attempt that started goes on to
// its end: the provider charges once, the order becomes paid by that very
// attempt (attempt 1, not a recovery), and the key's later request
// replays the stored result.
//
// Every backend, partitioned PostgreSQL too: the test makes and partitions
// the tables (idemtest's Setup) and River's, and the server starts with
// -migrate=false, as in production.
func TestDisconnectedPaymentIsFinished(t *testing.T) {
	bin := proctest.Build(t, ".")
	for _, b := range idemtest.Kinds() {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			db := idemtest.Open(t, b)
			env, args := serverTables(t, db)
			args = append(args, "-provider-latency", "2s")
			srv := startServer(t, bin, env, args)
			prov := openLedger(t, ledgerDSN(db))

			order := srv.newOrder(t, "acme", "order-1")
			const key = "pay-1"
			ctx, hangUp := context.WithCancel(context.Background())
			defer hangUp()
			gone := make(chan error, 1)
			go func() {
				_, err := srv.doContext(ctx, "acme", payMutation, map[string]any{"k": key, "o": order})
				gone <- err
			}()
			// The provider call begins once the claim is committed: hang up
			// then, 2 s before the provider charges.
			waitClaimed(t, db, b, key)
			hangUp()
			if err := <-gone; err == nil {
				t.Fatal("the request answered before the client hung up: the provider call was not in progress")
			}

			testkit.Eventually(t, func() bool { return srv.paid(t, order) }, "the order paid with nobody waiting")
			if s := claimStatus(t, db, b, key); s != "succeeded" {
				t.Fatalf("the payment's record is %s, want succeeded", s)
			}
			if n := claimAttempt(t, db, b, key); n != 1 {
				t.Fatalf("the payment was stored by attempt %d, want 1: the attempt whose client hung up did not finish\n%s", n, srv.Output())
			}
			if cs := charges(t, prov, order); len(cs) != 1 || cs[0].Voided {
				t.Fatalf("provider charges %+v, want one live charge", cs)
			}
			r := srv.pay("acme", key, order)
			if len(r.Errors) > 0 || !strings.Contains(r.body, `"replayed":true`) || !strings.Contains(r.body, `"paid":true`) {
				t.Fatalf("the key's later request: %s, want the stored payment replayed", r.body)
			}
			if cs := charges(t, prov, order); len(cs) != 1 {
				t.Fatalf("%d provider charges after the replay, want 1", len(cs))
			}
		})
	}
}

// Abandoned claims are finished by default: a server, on its default
// settings but for a short lease, is killed once the provider has charged
// a payment, before its answer; nobody retries. Another server on its
// default settings (the recoverer on, idem.DefaultRecoverAfter) finishes
// the payment with its key: the order is paid with one live charge, by
// attempt 2, and the key's late request replays it.
func TestAbandonedPaymentIsFinishedByDefault(t *testing.T) {
	bin := proctest.Build(t, ".")
	for _, b := range idemtest.Kinds() {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			db := idemtest.Open(t, b)
			env, args := serverTables(t, db)
			args = append(args, "-lease", "1s")
			prov := openLedger(t, ledgerDSN(db))
			victim := startServer(t, bin, env, append(slices.Clip(args), "-provider-response-latency", "30s"))
			order := victim.newOrder(t, "acme", "order-1")
			const key = "pay-1"
			go victim.pay("acme", key, order)
			testkit.Eventually(t, func() bool { return len(charges(t, prov, order)) > 0 }, "the provider charged")
			victim.Kill(t)
			if s := claimStatus(t, db, b, key); s != "pending" {
				t.Fatalf("the payment is %s after the kill, want pending", s)
			}

			survivor := startServer(t, bin, env, args)
			testkit.Eventually(t, func() bool { return survivor.paid(t, order) }, "the order paid with nobody retrying")
			if n := claimAttempt(t, db, b, key); n != 2 {
				t.Fatalf("the payment was stored by attempt %d, want 2 (the recoverer's)", n)
			}
			if cs := charges(t, prov, order); len(cs) != 1 || cs[0].Voided {
				t.Fatalf("provider charges %+v, want one live charge", cs)
			}
			r := survivor.pay("acme", key, order)
			if len(r.Errors) > 0 || !strings.Contains(r.body, `"replayed":true`) || !strings.Contains(r.body, `"paid":true`) {
				t.Fatalf("the key's late request: %s, want the stored payment replayed", r.body)
			}
		})
	}
}

// serverTables is serverDatabase, and on PostgresPartitioned the tables
// made and partitioned beforehand (idemtest's Setup) with River's and the
// simulated provider's and mailer's, for a
// server started with -migrate=false, as in production: ent's automatic
// migration would undo the partitioning.
func serverTables(t *testing.T, db *idemtest.DB) (env, args []string) {
	t.Helper()
	env, args = serverDatabase(db)
	if db.Kind != idemtest.PostgresPartitioned {
		return env, args
	}
	ctx := context.Background()
	client := ent.NewClient(ent.Driver(db.Driver))
	if err := db.Setup(ctx, client.IdempotencyBackend(), client.Schema.Create); err != nil {
		t.Fatal(err)
	}
	if err := graph.MigrateRiver(ctx, db.Driver); err != nil {
		t.Fatal(err)
	}
	// The simulated provider's and mailer's tables, which -migrate=false
	// does not create (cmd/migrate up does, with the rest).
	if err := errors.Join(provider.Migrate(ctx, db.Driver.DB(), db.Driver.Dialect()), mailer.Migrate(ctx, db.Driver.DB(), db.Driver.Dialect())); err != nil {
		t.Fatal(err)
	}
	return env, append(args, "-migrate=false")
}

// ledgerDSN is where the server keeps the simulated provider's ledger on
// db: the same PostgreSQL database, or a SQLite file beside db's.
func ledgerDSN(db *idemtest.DB) string {
	if db.Kind == idemtest.SQLite {
		return strings.TrimSuffix(db.DSN, ".db") + "-provider.db"
	}
	return db.DSN
}

const payMutation = `mutation($k: String!, $o: ID!) { createPayment(idempotencyKey: $k, input: {orderID: $o, amount: 4200}) { id amount providerChargeID order { paid payments { id amount } } } }`

// doContext is do, cancelled with ctx: cancelling it closes the client's
// connection.
func (p *serverProcess) doContext(ctx context.Context, tenant, query string, vars map[string]any) (*gqlResult, error) {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
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

// claimAttempt returns the attempt that holds (or stored) the payment of
// key.
func claimAttempt(t *testing.T, db *idemtest.DB, b idemtest.Kind, key string) int {
	t.Helper()
	q := `SELECT idempotency_attempt FROM payments WHERE idempotency_key = ?`
	if b.IsPostgres() {
		q = strings.ReplaceAll(q, "?", "$1")
	}
	var n int
	if err := db.Driver.DB().QueryRowContext(context.Background(), q, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
