package graph_test

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
	"time"

	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
)

// smallPool is the pool of the tests below: far fewer connections than
// concurrent requests.
const smallPool = 4

// newSmallApp is newApp with the application's client on a pool of
// smallPool connections.
func newSmallApp(t testing.TB, backend idemtest.Kind, opts ...appOption) *app {
	t.Helper()
	return startApp(t, backend, smallPool, opts...)
}

// burst is how many requests the tests below send at once.
const burst = 256

// sendAll sends burst requests at once, with the variables vars(i), and
// returns the responses in order. A request that gets no answer fails the
// test, and so does a burst still unanswered after a minute: a pool that
// deadlocked.
func (a *app) sendAll(t *testing.T, tenant, query string, vars func(i int) map[string]any) []*testkit.Response {
	t.Helper()
	responses := make([]*testkit.Response, burst)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range burst {
		wg.Go(func() {
			<-start
			r, err := a.Send(tenant, query, vars(i), nil)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
			}
			responses[i] = r
		})
	}
	close(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the burst is still unanswered after a minute: the pool deadlocked")
	}
	if t.Failed() {
		t.FailNow()
	}
	return responses
}

// A burst of duplicates in atomic mode on a pool of four connections: the
// first request holds one in its transaction, duplicates hold the others
// while they wait on the unique index, and the rest queue for a connection.
// No request fails, none deadlocks, and every one gets the first result.
func TestAtomicDuplicatesOnASmallPool(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newSmallApp(t, b)
		responses := a.sendAll(t, "acme", createOrder, func(int) map[string]any {
			return map[string]any{"key": "atomic-burst", "amount": 990, "currency": "EUR"}
		})
		replays := 0
		for i, r := range responses {
			if len(r.Errors) > 0 || !bytes.Equal(r.Data, responses[0].Data) {
				t.Fatalf("response %d: %s (first: %s)", i, r.Body, responses[0].Body)
			}
			if r.Replayed {
				replays++
			}
		}
		if replays != burst-1 {
			t.Errorf("%d replays, want %d", replays, burst-1)
		}
		count, err := a.Client.Order.Query().Count(idemschema.IncludeUnfinished(context.Background()))
		if err != nil || count != 1 {
			t.Fatalf("%d orders (%v), want 1", count, err)
		}
	})
}

// The same burst in lease mode, whose duplicates wait for the result
// (WaitForInFlight), polling the record without holding a connection in
// between; on PostgreSQL the first request renews its lease (every third of
// it) with a second connection of the same pool while its transaction holds
// one. Nobody takes the live attempt over: the provider is reached once.
func TestLeaseDuplicatesOnASmallPool(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newSmallApp(t, b, func(o *graph.Options) {
			// Renewed every 2 s: 4 s of slack for a renewal that a busy
			// machine delays.
			o.Lease = 6 * time.Second
			o.WaitForInFlight = time.Minute
		})
		order := a.newOrder("acme", 500)
		a.Provider.Latency = 3 * time.Second // a renewal falls inside it
		responses := a.sendAll(t, "acme", createPayment, func(int) map[string]any {
			return map[string]any{"key": "lease-burst", "order": order, "amount": 500}
		})
		for i, r := range responses {
			if len(r.Errors) > 0 || !bytes.Equal(r.Data, responses[0].Data) {
				t.Fatalf("response %d: %s (first: %s)", i, r.Body, responses[0].Body)
			}
		}
		if n := a.allPayments(); n != 1 {
			t.Fatalf("%d payments, want 1", n)
		}
		if cs := a.charges("acme", order); len(cs) != 1 || cs[0].Requests != 1 {
			t.Fatalf("provider charges = %+v, want one charge reached once", cs)
		}
	})
}

// A burst of different keys on a pool of four connections: requests beyond
// the pool wait for a connection instead of failing.
func TestManyKeysOnASmallPool(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newSmallApp(t, b)
		responses := a.sendAll(t, "acme", createOrder, func(i int) map[string]any {
			return map[string]any{"key": fmt.Sprintf("many-%d", i), "amount": 100 + i, "currency": "EUR"}
		})
		for i, r := range responses {
			if len(r.Errors) > 0 || r.Replayed {
				t.Fatalf("response %d: %s", i, r.Body)
			}
		}
		count, err := a.Client.Order.Query().Count(idemschema.IncludeUnfinished(context.Background()))
		if err != nil || count != burst {
			t.Fatalf("%d orders (%v), want %d", count, err, burst)
		}
	})
}

// A request that waits for a connection waits as long as its context
// allows, no longer: when the context ends first, it answers
// IDEMPOTENCY_UNAVAILABLE, nothing is stored, and the key runs once a
// connection is free.
func TestWaitForAConnectionEndsWithTheRequest(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newSmallApp(t, b)
		giveBack := a.holdPool(t)
		ctx := context.Background()
		body, _ := json.Marshal(map[string]any{"query": createOrder, "variables": map[string]any{"key": "waited", "amount": 700, "currency": "EUR"}})
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		req := httptest.NewRequestWithContext(rctx, http.MethodPost, "/query", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(graph.TenantHeader, "acme")
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			a.Server.Config.Handler.ServeHTTP(rec, req)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(testkit.WaitBound):
			t.Fatal("the request did not end with its context")
		}
		if !strings.Contains(rec.Body.String(), string(idemcode.Unavailable)) {
			t.Fatalf("request whose context ended while it waited for a connection: %s", rec.Body)
		}
		giveBack()
		r := a.do("acme", createOrder, map[string]any{"key": "waited", "amount": 700, "currency": "EUR"})
		if len(r.Errors) > 0 || r.Replayed {
			t.Fatalf("the key after the connections were freed: %s", r.Body)
		}
	})
}

// A request waits for a connection as long as its client does, however
// long: what must run to its end even if the client goes (a claim in lease
// mode commits by itself) is bounded only once the client has gone, not
// while it waits. Here every connection stays busy for longer than that
// bound (5 s), and the payment is made once, when one is free.
func TestWaitForAConnectionAsLongAsTheClient(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newSmallApp(t, b)
		order := a.newOrder("acme", 500)
		giveBack := a.holdPool(t)
		paid := make(chan *testkit.Response, 1)
		go func() {
			r, err := a.Send("acme", createPayment, map[string]any{"key": "queued", "order": order, "amount": 500}, nil)
			if err != nil {
				t.Error(err)
			}
			paid <- r
		}()
		time.Sleep(6 * time.Second) // the pool busy for longer than the bound: a busier machine only makes it longer
		giveBack()
		if r := <-paid; r == nil || len(r.Errors) > 0 || r.Outcome("createPayment") != idemcode.OutcomeExecuted {
			if r == nil {
				t.FailNow()
			}
			t.Fatalf("a payment that waited for a connection: %s", r.Body)
		}
		if cs := a.charges("acme", order); len(cs) != 1 || cs[0].Requests != 1 {
			t.Fatalf("provider charges = %+v, want one charge reached once", cs)
		}
	})
}

// holdPool takes every connection of the app's pool and returns the func
// that gives them back; the test's cleanup gives back what is still held,
// however the test ends: the pool closes (in an earlier cleanup, which runs
// after this one) only once every connection is back, so a failure with
// the connections held would hang.
func (a *app) holdPool(t *testing.T) (giveBack func()) {
	t.Helper()
	var held []*sql.Conn
	giveBack = func() {
		for _, c := range held {
			c.Close()
		}
		held = nil
	}
	t.Cleanup(giveBack)
	for range smallPool {
		c, err := a.Driver.DB().Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	return giveBack
}
