package pgxdriver_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/goovo/idem"
	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/ent/order"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemdb/pgxdriver"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/exampletest"
	"github.com/goovo/idem/internal/testkit/pgproxy"
)

// TestHookOnTheDriver runs the example application, idempotency hook
// included, on the driver, where the hook's store pipelines: new keys and
// retries of both modes, a final error, a storm of duplicates, and the
// round trips each mutation costs next to database/sql's through the same
// proxy.
func TestHookOnTheDriver(t *testing.T) {
	app := exampletest.Start(t, idemtest.Postgres, exampletest.Config{})
	proxy, dsn, err := pgproxy.For(app.DB.DSN)
	must(t, err)
	t.Cleanup(func() { proxy.Close() })
	cfg, err := pgxpool.ParseConfig(dsn)
	must(t, err)
	cfg.MaxConns = 8
	cfg.ShouldPing = oneConnNoPing
	drv, err := pgxdriver.OpenConfig(cfg)
	must(t, err)
	testkit.CloseInCleanup(t, "the pgx pool", func() { drv.Close() })
	stdDB, err := sql.Open("pgx", dsn)
	must(t, err)
	t.Cleanup(func() { stdDB.Close() })
	stdDB.SetMaxOpenConns(8)
	stdDB.SetMaxIdleConns(8)

	// The recoverer's scans would share the proxy and be counted with the
	// requests' statements: off, as it is only the requests' cost here.
	opts := graph.Options{Logger: testkit.Logger(t), RecoverAfter: idem.RecoverNever}
	pgxClient := ent.NewClient(ent.Driver(drv))
	clients := map[string]*ent.Client{
		"pgx":          pgxClient,
		"database/sql": ent.NewClient(ent.Driver(entsql.OpenDB("postgres", stdDB))),
	}
	handlers := map[string]http.Handler{}
	for name, c := range clients {
		handlers[name] = app.Handler(c, opts)
	}
	postAs := func(h http.Handler, header http.Header, query string, vars map[string]any) (*httptest.ResponseRecorder, string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
		req := httptest.NewRequest(http.MethodPost, "/query", bytes.NewReader(body))
		req.Header = header.Clone()
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(graph.TenantHeader, "acme")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec, rec.Body.String()
	}
	post := func(h http.Handler, query string, vars map[string]any) (*httptest.ResponseRecorder, string) {
		t.Helper()
		return postAs(h, http.Header{}, query, vars)
	}
	// What idemclient sends on its first retry.
	retry := http.Header{idemcode.HeaderRetry: {"1"}}
	const createOrder = `mutation($key: String!) { createOrder(idempotencyKey: $key, input: {amount: 1200, currency: "EUR"}) { id amount paid } }`
	const createOrderWithEdge = `mutation($key: String!) { createOrder(idempotencyKey: $key, input: {amount: 1200, currency: "EUR"}) { id amount payments { id } } }`
	const createPayment = `mutation($key: String!, $order: ID!) { createPayment(idempotencyKey: $key, input: {orderID: $order, amount: 1200}) { id amount order { paid } } }`
	const refund = `mutation($key: String!, $payment: ID!) { refundPayment(idempotencyKey: $key, paymentID: $payment, amount: 5000) { id } }`
	id := func(body, field string) string {
		var r struct {
			Data map[string]struct{ ID string }
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil || r.Data[field].ID == "" {
			t.Fatalf("%s: %s", field, body)
		}
		return r.Data[field].ID
	}

	trips, statements := map[string]map[string]int{}, map[string]map[string]int{}
	n := 0
	for _, name := range []string{"pgx", "database/sql"} {
		h := handlers[name]
		trips[name], statements[name] = map[string]int{}, map[string]int{}
		measure := func(what string, f func() string) string {
			// A replay's ROLLBACK runs after the answer (on pgx): wait
			// for it before counting, or starting to count.
			idle := func() {
				testkit.Eventually(t, func() bool { return drv.Pool().Stat().AcquiredConns() == 0 }, "the pool's connections back")
			}
			f() // warm the connections' statement caches
			idle()
			proxy.Reset()
			body := f()
			idle()
			trips[name][what], statements[name][what] = proxy.RoundTrips(), proxy.Statements()
			t.Logf("%s, %s: %d statements in %d round trips", name, what, proxy.Statements(), proxy.RoundTrips())
			return body
		}
		var orderKey, paymentKey string
		measure("atomic, new key", func() string {
			n++
			orderKey = fmt.Sprintf("order-%d", n)
			_, body := post(h, createOrder, map[string]any{"key": orderKey})
			return body
		})
		// The same create with an edge in its selection: the row alone
		// cannot answer it, so it takes the atomic path.
		measure("atomic, new key, an edge selected", func() string {
			n++
			_, body := post(h, createOrderWithEdge, map[string]any{"key": fmt.Sprintf("order-%d", n)})
			if !strings.Contains(body, `"payments":[]`) {
				t.Errorf("%s: create with an edge: %s", name, body)
			}
			return body
		})
		first, _ := post(h, createOrder, map[string]any{"key": orderKey})
		replay := measure("atomic, replay", func() string {
			_, body := post(h, createOrder, map[string]any{"key": orderKey})
			return body
		})
		if !strings.Contains(replay, orderKey) && first.Header().Get(idemcode.HeaderReplayed) != "true" {
			t.Errorf("%s: retry of createOrder not replayed: %s", name, replay)
		}
		// The same retry in processes that have not seen the key finished
		// (each measured call a new one, warmed by a key of its own: its
		// clock read, its statements prepared).
		others := []http.Handler{app.Handler(clients[name], opts), app.Handler(clients[name], opts), app.Handler(clients[name], opts), app.Handler(clients[name], opts)}
		for i, h := range others {
			post(h, createOrder, map[string]any{"key": fmt.Sprintf("warm-%s-%d", name, i)})
		}
		// Sent as is, such a retry claims first; sent as a retry
		// (Idempotency-Retry), it is looked up first: one statement, which
		// writes nothing. Either way it replays what the first process
		// stored.
		for _, c := range []struct {
			what   string
			header http.Header
		}{
			{"atomic, replay in another process", http.Header{}},
			{"atomic, retry in another process", retry},
		} {
			elsewhere := measure(c.what, func() string {
				rec, body := postAs(others[0], c.header, createOrder, map[string]any{"key": orderKey})
				others = others[1:]
				if rec.Header().Get(idemcode.HeaderReplayed) != "true" {
					t.Errorf("%s, %s: not replayed: %s", name, c.what, body)
				}
				return body
			})
			if part(t, elsewhere, "data") != part(t, replay, "data") {
				t.Errorf("%s, %s: replayed %s, the process that stored it %s", name, c.what, elsewhere, replay)
			}
		}
		// A new key sent as a retry (its first attempt never reached the
		// database) is claimed after the lookup finds nothing.
		measure("atomic, new key sent as a retry", func() string {
			n++
			rec, body := postAs(h, retry, createOrder, map[string]any{"key": fmt.Sprintf("order-%d", n)})
			if rec.Header().Get(idemcode.HeaderReplayed) == "true" || !strings.Contains(body, `"outcome":"executed"`) {
				t.Errorf("%s: new key sent as a retry: %s", name, body)
			}
			return body
		})
		var orderID string
		measure("lease, new key (with the example's resolver)", func() string {
			_, body := post(h, createOrder, map[string]any{"key": fmt.Sprintf("o-%d-%s", n, name)})
			orderID = id(body, "createOrder")
			n++
			paymentKey = fmt.Sprintf("payment-%d", n)
			_, body = post(h, createPayment, map[string]any{"key": paymentKey, "order": orderID})
			return body
		})
		trips[name]["lease, new key (with the example's resolver)"] -= trips[name]["atomic, new key"]
		rec, body := post(h, createPayment, map[string]any{"key": paymentKey, "order": orderID})
		if rec.Header().Get(idemcode.HeaderReplayed) != "true" || !strings.Contains(body, `"paid":true`) {
			t.Errorf("%s: retry of createPayment: %s", name, body)
		}
		// A final error is stored and replayed.
		paymentID := id(body, "createPayment")
		_, failed := post(h, refund, map[string]any{"key": "refund-" + name, "payment": paymentID})
		rec, again := post(h, refund, map[string]any{"key": "refund-" + name, "payment": paymentID})
		if !strings.Contains(failed, `"errors"`) || part(t, again, "errors") != part(t, failed, "errors") || rec.Header().Get(idemcode.HeaderReplayed) != "true" {
			t.Errorf("%s: final error %s, replayed as %s", name, failed, again)
		}
	}
	// A new key of createOrder, whose selection its row answers, is a
	// claim born completed: one autocommitted INSERT, on either path. A
	// retry of its key in a process that has not seen it finish pays that
	// INSERT, which finds the key taken, and the lookup.
	//
	// With an edge selected, the create takes the atomic path, where pgx
	// pipelines: the claim (with BEGIN, and the lookup of a taken key) is
	// one round trip, SAVEPOINT goes with the resolver's first statement,
	// the completion with COMMIT; a retry that says so is a lookup alone,
	// on either path, and a new key sent as one pays that lookup on top of
	// its claim.
	want := map[string]int{"atomic, new key": 1, "atomic, replay in another process": 2, "atomic, replay": 1,
		"atomic, retry in another process": 1, "atomic, new key sent as a retry": 2, "atomic, new key, an edge selected": 3}
	wantStatements := map[string]int{"atomic, new key": 1, "atomic, replay in another process": 2, "atomic, retry in another process": 1,
		"atomic, new key sent as a retry": 2}
	for _, name := range []string{"pgx", "database/sql"} {
		for what, w := range wantStatements {
			if got := statements[name][what]; got != w {
				t.Errorf("%s: %d statements on %s, want %d", what, got, name, w)
			}
		}
	}
	if got := statements["pgx"]["atomic, new key, an edge selected"]; got < 5 {
		t.Errorf("atomic, new key, an edge selected: %d statements on pgx, want the atomic path's (at least 5)", got)
	}
	// Where the request is one statement at a time, pgx has nothing to
	// pipeline.
	sameTrips := map[string]bool{"atomic, new key": true, "atomic, replay": true, "atomic, retry in another process": true,
		"atomic, replay in another process": true, "atomic, new key sent as a retry": true}
	for what, pgx := range trips["pgx"] {
		std := trips["database/sql"][what]
		t.Logf("%s: %d round trips on pgx, %d on database/sql", what, pgx, std)
		if w, ok := want[what]; (ok && pgx != w) || pgx > std || (pgx == std && !sameTrips[what]) {
			t.Errorf("%s: %d round trips on pgx (database/sql: %d), want %d", what, pgx, std, w)
		}
	}

	// 32 duplicates of one key at once: one execution, one answer.
	var wg sync.WaitGroup
	bodies := make([]string, 32)
	for i := range bodies {
		wg.Go(func() { _, bodies[i] = post(handlers["pgx"], createOrder, map[string]any{"key": "storm"}) })
	}
	wg.Wait()
	executed := 0
	for _, b := range bodies {
		if part(t, b, "data") != part(t, bodies[0], "data") || strings.Contains(b, `"errors"`) {
			t.Fatalf("duplicates answered differently:\n%s\n%s", bodies[0], b)
		}
		if strings.Contains(b, `"outcome":"executed"`) {
			executed++
		}
	}
	if executed != 1 {
		t.Errorf("%d of the duplicates executed, want 1", executed)
	}
	if n := pgxClient.Order.Query().Where(order.IdempotencyKey("storm")).CountX(idemschema.IncludeUnfinished(context.Background())); n != 1 {
		t.Errorf("%d orders for one key", n)
	}
}

// part returns the raw JSON of one member of a GraphQL response.
func part(t *testing.T, body, member string) string {
	t.Helper()
	var r map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return string(r[member])
}

func oneConnNoPing(context.Context, pgxpool.ShouldPingParams) bool { return false }
