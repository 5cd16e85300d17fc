package graph_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/goovo/idem"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/example/provider"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/exampletest"
)

// receiptApp is newApp with the workers that deliver the receipts: a
// River client (every 100ms; the pgx path listens), or on MariaDB the
// receipt table's workers (every 100ms).
func receiptApp(t testing.TB, backend idemtest.Kind) *app {
	t.Helper()
	clock := &idem.ClockOffset{}
	p := &abandoning{giveUp: map[string]func(){}}
	a := &app{t: t, clock: clock, provider: p}
	a.App = exampletest.Start(t, backend, exampletest.Config{Options: graph.Options{Clock: clock, Logger: testkit.Logger(t)},
		Workers:  &graph.Workers{PollInterval: 100 * time.Millisecond},
		Provider: func(sim *provider.Simulated) provider.Provider { p.Simulated = sim; return p }})
	return a
}

type receipt struct {
	ID, PaymentID string
	Requests      int
}

// receipts returns what the mailer sent for an order of tenant.
func (a *app) receipts(tenant, order string) []receipt {
	a.t.Helper()
	r := a.do(tenant, `query($o: ID!) { receipts(orderID: $o) { id paymentID requests } }`, map[string]any{"o": order})
	var d struct{ Receipts []receipt }
	if err := json.Unmarshal(r.Data, &d); err != nil || len(r.Errors) > 0 {
		a.t.Fatalf("receipts: %s", r.Body)
	}
	return d.Receipts
}

// receiptJobs counts the receipt jobs in River's table, worked or not (on
// MariaDB the rows of the receipt table).
func receiptJobs(t testing.TB, a *exampletest.App) int {
	t.Helper()
	q := `SELECT count(*) FROM river_job WHERE kind = 'send_receipt'`
	if a.DB.Kind == idemtest.MariaDB {
		q = `SELECT count(*) FROM ` + graph.ReceiptTable
	}
	var n int
	if err := a.Driver.DB().QueryRowContext(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// awaitOneReceipt waits for the order's receipt and checks it is the
// payment's, sent once.
func (a *app) awaitOneReceipt(tenant, order, payment string) {
	a.t.Helper()
	var got []receipt
	testkit.Eventually(a.t, func() bool {
		got = a.receipts(tenant, order)
		return len(got) > 0
	}, "the receipt of order %s", order)
	if len(got) != 1 || got[0].Requests != 1 || (payment != "" && got[0].PaymentID != payment) {
		a.t.Fatalf("receipts %+v, want one of payment %s, requested once", got, payment)
	}
}

// A paid payment sends its receipt after its commit, once: its retries
// replay and enqueue nothing.
func TestPaidPaymentSendsOneReceipt(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := receiptApp(t, b)
		order := a.newOrder("acme", 700)
		r := a.pay("acme", "pay", order, 700)
		var d struct{ CreatePayment struct{ ID string } }
		if err := json.Unmarshal(r.Data, &d); err != nil || len(r.Errors) > 0 {
			t.Fatalf("payment: %s", r.Body)
		}
		for range 3 {
			if again := a.pay("acme", "pay", order, 700); !again.Replayed {
				t.Fatalf("retry: %s", again.Body)
			}
		}
		a.awaitOneReceipt("acme", order, d.CreatePayment.ID)
		if n := receiptJobs(t, a.App); n != 1 {
			t.Fatalf("%d receipt jobs, want 1", n)
		}
		if other := a.receipts("globex", order); len(other) != 0 {
			t.Fatalf("another tenant sees the receipts: %+v", other)
		}
	})
}

// A payment that fails sends no receipt: refused by a business rule (a
// final error), failed at the provider (retryable: rolled back and
// released), or beaten by another payment of the order.
func TestFailedPaymentSendsNoReceipt(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := receiptApp(t, b)
		order := a.newOrder("acme", 800)
		if r := a.pay("acme", "wrong-amount", order, 799); r.Code() != "BAD_USER_INPUT" {
			t.Fatalf("wrong amount: %s", r.Body)
		}
		a.Provider.FailureRate = 1
		if r := a.pay("acme", "provider-down", order, 800); len(r.Errors) == 0 {
			t.Fatalf("provider down: %s", r.Body)
		}
		a.Provider.FailureRate = 0
		if r := a.pay("acme", "winner", order, 800); len(r.Errors) > 0 {
			t.Fatalf("payment: %s", r.Body)
		}
		if r := a.pay("acme", "second", order, 800); r.Code() != "ORDER_ALREADY_PAID" {
			t.Fatalf("second payment: %s", r.Body)
		}
		a.awaitOneReceipt("acme", order, "")
		if n := receiptJobs(t, a.App); n != 1 {
			t.Fatalf("%d receipt jobs, want the winner's only", n)
		}
	})
}

// held is a provider whose first charge of a key stays in flight, after
// it charged, until the test releases it: a slow attempt.
type held struct {
	provider.Provider
	key      string
	once     sync.Once
	charged  chan struct{}
	released chan struct{}
}

func (h *held) Charge(ctx context.Context, req provider.ChargeRequest) (*provider.Charge, error) {
	c, err := h.Provider.Charge(ctx, req)
	if err != nil || req.Key != h.key {
		return c, err
	}
	first := false
	h.once.Do(func() { first = true })
	if first {
		close(h.charged)
		<-h.released
	}
	return c, err
}

// A slow attempt taken over: the slow one, which enqueued the receipt, is
// fenced out at its completion with its job; the attempt that took over
// pays (the provider deduplicates the charge by key) and enqueues the
// receipt. One receipt. PostgreSQL and MariaDB only: on SQLite a live
// attempt holds the write lock, and only a dead one is taken over (the
// crash tests of cmd/server).
func TestTakenOverPaymentSendsOneReceipt(t *testing.T) {
	for _, b := range []idemtest.Kind{idemtest.Postgres, idemtest.PostgresPartitioned, idemtest.MariaDB} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			clock := &idem.ClockOffset{}
			h := &held{key: "slow", charged: make(chan struct{}), released: make(chan struct{})}
			var once sync.Once
			release := func() { once.Do(func() { close(h.released) }) }
			t.Cleanup(release)
			ea := exampletest.Start(t, b, exampletest.Config{
				Options:  graph.Options{Clock: clock, Lease: time.Minute, Logger: testkit.Logger(t)},
				Provider: func(sim *provider.Simulated) provider.Provider { h.Provider = sim; return h },
				Workers:  &graph.Workers{PollInterval: 100 * time.Millisecond},
			})
			a := &app{App: ea, t: t, clock: clock}
			order := a.newOrder("acme", 600)
			slow := make(chan *testkit.Response)
			go func() { slow <- a.pay("acme", "slow", order, 600) }()
			<-h.charged
			clock.Advance(61 * time.Second) // past the slow attempt's lease
			// The attempt that takes over waits for the order's row, which
			// the slow one locked when it marked it paid: the slow one is
			// released once the takeover is recorded.
			taken := make(chan *testkit.Response)
			go func() { taken <- a.pay("acme", "slow", order, 600) }()
			testkit.Eventually(t, func() bool {
				var attempt int
				q := `SELECT idempotency_attempt FROM payments WHERE idempotency_key = 'slow'`
				if err := a.Driver.DB().QueryRowContext(context.Background(), q).Scan(&attempt); err != nil {
					t.Fatal(err)
				}
				return attempt == 2
			}, "the slow payment taken over")
			release()
			winner := <-taken
			if len(winner.Errors) > 0 {
				t.Fatalf("takeover: %s", winner.Body)
			}
			// The slow attempt, fenced out, looks again: the winner's
			// result, or, while the winner still runs, IN_PROGRESS.
			if loser := <-slow; string(loser.Data) != string(winner.Data) && loser.Code() != "IDEMPOTENCY_IN_PROGRESS" {
				t.Fatalf("the slow attempt answered %s, want the winner's %s", loser.Body, winner.Body)
			}
			if later := a.pay("acme", "slow", order, 600); string(later.Data) != string(winner.Data) || !later.Replayed {
				t.Fatalf("later retry: %s", later.Body)
			}
			if n := receiptJobs(t, a.App); n != 1 {
				t.Fatalf("%d receipt jobs, want 1", n)
			}
			a.awaitOneReceipt("acme", order, "")
		})
	}
}
