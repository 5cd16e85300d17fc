package idemdb_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/example/mailer"
	"github.com/goovo/idem/internal/example/provider"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/pgcluster"
)

func TestOpenPool(t *testing.T) {
	dsn := idemtest.PostgresURL()
	for _, c := range []struct {
		pool      idemdb.Pool
		open, idl int
	}{
		{idemdb.Pool{}, idemdb.DefaultMaxConns, idemdb.DefaultMaxConns},
		{idemdb.Pool{MaxConns: 3}, 3, 3},
		{idemdb.Pool{MaxConns: 3, MaxIdleConns: 1}, 3, 1},
	} {
		drv, err := idemdb.OpenSQL(dsn, c.pool)
		if err != nil {
			t.Fatal(err)
		}
		if got := drv.DB().Stats().MaxOpenConnections; got != c.open {
			t.Errorf("%+v: %d connections at most, want %d", c.pool, got, c.open)
		}
		drv.Close()
	}
}

// A URL that pgx cannot use is refused when it is opened, with pgx's
// reason, and without its password.
func TestOpenRefusesABadURL(t *testing.T) {
	_, err := idemdb.Open("postgres://app:s3cret@127.0.0.1:5432/app?default_query_exec_mode=prepared")
	if err == nil || !strings.Contains(err.Error(), "default_query_exec_mode") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %v: want one about default_query_exec_mode, without the password", err)
	}
}

// WaitReady retries until its time is up when nothing answers, and gives up
// at once when the database does not exist.
func TestWaitReady(t *testing.T) {
	ctx := context.Background()
	// Port 1: nothing listens there. A port that was free a moment ago
	// (pgcluster.FreePort) may be a test cluster's by now: the tests of
	// other packages start PostgreSQL servers on such ports meanwhile.
	drv, err := idemdb.Open("postgres://postgres@127.0.0.1:1/app?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	var log bytes.Buffer
	err = idemdb.WaitReady(ctx, drv.DB(), time.Second, slog.New(slog.NewTextHandler(&log, nil)))
	if err == nil || !strings.Contains(err.Error(), "database unavailable for 1s") {
		t.Fatalf("nobody listens: %v", err)
	}
	if n := strings.Count(log.String(), "database unavailable; waiting for it"); n < 2 {
		t.Errorf("%d retries logged, want several:\n%s", n, &log)
	}

	u := idemtest.PostgresURLOf("idemdb_no_such_database")
	if u == idemtest.PostgresURL() {
		t.Fatalf("cannot name another database in %s", u)
	}
	drv2, err := idemdb.Open(u)
	if err != nil {
		t.Fatal(err)
	}
	defer drv2.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = idemdb.WaitReady(ctx, drv2.DB(), time.Minute, nil)
	if err == nil || !strings.Contains(err.Error(), "does not exist") || ctx.Err() != nil {
		t.Fatalf("unknown database: %v (want an error at once)", err)
	}
}

// Behind PgBouncer in transaction pooling mode, with
// default_query_exec_mode=exec in the URL, the example application works:
// its migration, and bursts of duplicates in atomic mode (orders) and in
// lease mode (payments), through two server connections for fifty clients.
func TestBehindPgBouncer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Init(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Remove(); err != nil {
			t.Error(err)
		}
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The provider's ledger gets a pool of its own (see the README).
	b, err := pgcluster.StartBouncer(ctx, c, pgcluster.BouncerOptions{PoolSize: 2, Databases: map[string]string{"ledger": "postgres"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Error(err)
		}
	})
	const mode = "&default_query_exec_mode=exec"
	drv, err := idemdb.Open(b.URL("postgres") + mode)
	if err != nil {
		t.Fatal(err)
	}
	if err := idemdb.WaitReady(ctx, drv.DB(), 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	client := ent.NewClient(ent.Driver(drv))
	t.Cleanup(func() { client.Close() })
	if err := client.Schema.Create(ctx); err != nil {
		t.Fatal(err)
	}
	ledger, err := idemdb.Open(b.URL("ledger") + mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledger.Close() })
	if err := errors.Join(provider.Migrate(ctx, ledger.DB(), ledger.Dialect()), mailer.Migrate(ctx, ledger.DB(), ledger.Dialect())); err != nil {
		t.Fatal(err)
	}
	prov, err := provider.NewSimulated(ctx, ledger.DB(), ledger.Dialect())
	if err != nil {
		t.Fatal(err)
	}
	prov.Latency = 50 * time.Millisecond
	// The outbox behind PgBouncer: River's tables migrated through it, and
	// River polling (transaction pooling cannot hold a LISTEN).
	if err := graph.MigrateRiver(ctx, drv); err != nil {
		t.Fatal(err)
	}
	mail, err := mailer.NewSimulated(ctx, ledger.DB(), ledger.Dialect())
	if err != nil {
		t.Fatal(err)
	}
	stop, err := graph.StartWorkers(ctx, client, drv, graph.Workers{Mailer: mail, PollOnly: true, PollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop(context.Background()) })
	hook, err := graph.NewHook(client, graph.Options{WaitForInFlight: 30 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h, err := graph.NewHandler(client, prov, mail, hook)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	// burst sends one request 50 times at once; every answer must carry
	// the same data.
	burst := func(query string, vars map[string]any) json.RawMessage {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
		answers := make([][]byte, 50)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/query", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(graph.TenantHeader, "acme")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer res.Body.Close()
				answers[i], _ = io.ReadAll(res.Body)
			})
		}
		wg.Wait()
		var first struct {
			Data   json.RawMessage
			Errors []any
		}
		if err := json.Unmarshal(answers[0], &first); err != nil || len(first.Errors) > 0 || len(first.Data) == 0 {
			t.Fatalf("answer: %s", answers[0])
		}
		for i, a := range answers {
			var r struct{ Data json.RawMessage }
			if err := json.Unmarshal(a, &r); err != nil || !bytes.Equal(r.Data, first.Data) {
				t.Fatalf("answer %d differs: %s, first: %s", i, a, answers[0])
			}
		}
		return first.Data
	}
	var order struct{ CreateOrder struct{ ID string } }
	_ = json.Unmarshal(burst(`mutation($k: String!) { createOrder(idempotencyKey: $k, input: {amount: 900, currency: "EUR"}) { id amount } }`,
		map[string]any{"k": "order-1"}), &order)
	burst(`mutation($k: String!, $o: ID!) { createPayment(idempotencyKey: $k, input: {orderID: $o, amount: 900}) { id providerChargeID order { paid } } }`,
		map[string]any{"k": "pay-1", "o": order.CreateOrder.ID})

	var id int
	fmt.Sscan(order.CreateOrder.ID, &id)
	if cs, err := prov.Charges(ctx, "acme", id); err != nil || len(cs) != 1 || cs[0].Requests != 1 {
		t.Fatalf("provider charges %+v (%v), want one, reached once", cs, err)
	}
	if n, err := client.Order.Query().Count(ctx); err != nil || n != 1 {
		t.Fatalf("%d orders (%v), want 1", n, err)
	}
	// The payment's receipt, enqueued in its transaction, is sent once.
	testkit.Eventually(t, func() bool {
		rs, err := mail.Receipts(ctx, "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) > 1 || (len(rs) == 1 && rs[0].Requests != 1) {
			t.Fatalf("receipts %+v, want one, requested once", rs)
		}
		return len(rs) == 1
	}, "the payment's receipt sent")
}
