package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The mutations the workload sends. The selections are fixed, so that every
// request of a key has the same fingerprint and the same stored bytes.
const (
	orderMutation = `mutation($key: String!, $input: CreateOrderInput!) {
  createOrder(idempotencyKey: $key, input: $input) { id amount currency paid }
}`
	paymentMutation = `mutation($key: String!, $input: CreatePaymentInput!) {
  createPayment(idempotencyKey: $key, input: $input) { id amount providerChargeID order { id paid } }
}`
)

// intent is one business action a client wants done once: one key and one
// request body, sent by one or more clients (duplicates) until each of them
// has a final answer.
type intent struct {
	field  string // createOrder or createPayment
	key    string
	tenant string
	body   []byte
	amount int
	// orderID is the order a createPayment pays; competing marks the
	// second of two payments of one order, each with its own key: at most
	// one of them may succeed.
	orderID   string
	competing bool
	burst     bool // sent by the burst, not the load phase
	// noRetry: one request, never retried (a client that crashed); the
	// servers' recoverer must finish what it left pending.
	noRetry bool

	mu      sync.Mutex
	started time.Time
	latency time.Duration // from the first attempt to the first final answer
	first   *answer       // the first final answer
	differ  []answer      // later final answers that differ from it
}

// answer is a final answer as a client received it.
type answer struct {
	kind   string
	data   []byte
	server int
}

// same reports whether two final answers say the same thing: the same data
// bytes, and both successes (executed or replayed) or the same error.
func (a answer) same(b answer) bool {
	return bytes.Equal(a.data, b.data) && outcomeClass(a.kind) == outcomeClass(b.kind)
}

func outcomeClass(kind string) string {
	if kind == "executed" || kind == "replayed" {
		return "success"
	}
	return kind
}

func (in *intent) record(v verdict, server int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	a := answer{kind: v.kind, data: bytes.Clone(v.data), server: server}
	if in.first == nil {
		in.first = &a
		in.latency = time.Since(in.started)
	} else if !in.first.same(a) {
		in.differ = append(in.differ, a)
	}
}

// result returns the first final answer, if any.
func (in *intent) result() (answer, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.first == nil {
		return answer{}, false
	}
	return *in.first, true
}

// succeeded reports whether the intent's final answer is a success.
func (in *intent) succeeded() bool {
	a, ok := in.result()
	return ok && outcomeClass(a.kind) == "success"
}

// orderResult and paymentResult are the parts of the answers the audit
// compares with the database.
type orderResult struct {
	CreateOrder struct {
		ID string `json:"id"`
	} `json:"createOrder"`
}

type paymentResult struct {
	CreatePayment struct {
		ID               string `json:"id"`
		Amount           int    `json:"amount"`
		ProviderChargeID string `json:"providerChargeID"`
		Order            struct {
			ID   string `json:"id"`
			Paid bool   `json:"paid"`
		} `json:"order"`
	} `json:"createPayment"`
}

func newIntent(field, key, tenant string, amount int, orderID string) *intent {
	input := map[string]any{"amount": amount, "currency": "EUR"}
	query := orderMutation
	if field == "createPayment" {
		input = map[string]any{"amount": amount, "orderID": orderID}
		query = paymentMutation
	}
	// Marshalled once: every copy and every retry sends these bytes.
	body, _ := json.Marshal(map[string]any{"query": query, "variables": map[string]any{"key": key, "input": input}})
	return &intent{field: field, key: key, tenant: tenant, body: body, amount: amount, orderID: orderID}
}

// registry holds every intent of the run, for the audit.
type registry struct {
	mu      sync.Mutex
	intents []*intent
}

func (r *registry) add(in *intent) {
	r.mu.Lock()
	r.intents = append(r.intents, in)
	r.mu.Unlock()
}

func (r *registry) all() []*intent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.intents)
}

// workload plays customers: each creates an order and usually pays it,
// sometimes twice with two different keys (a competing payment), every
// intent sometimes sent by several clients to several servers at once.
type workload struct {
	cfg    *faultsConfig
	client *client
	stats  *stats
	reg    *registry
	prefix string // makes this run's keys unique (runID)
}

// runID returns a random prefix for the keys of a run: with -schema, runs
// share a database, and a key of an earlier run would be replayed, not run.
func runID() string {
	b := make([]byte, 4)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// run starts customers (at cfg.rate per second, cfg.clients at a time)
// until load ends, then waits for the started ones, whose intents retry
// until they are answered or deadline ends.
func (w *workload) run(load, deadline context.Context) {
	customers := make(chan int)
	var wg sync.WaitGroup
	for range w.cfg.clients {
		wg.Go(func() {
			for n := range customers {
				w.customer(deadline, n)
			}
		})
	}
	var tick <-chan time.Time
	if w.cfg.rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / w.cfg.rate))
		defer t.Stop()
		tick = t.C
	}
feed:
	for n := 0; ; n++ {
		if tick != nil {
			select {
			case <-load.Done():
				break feed
			case <-tick:
			}
		}
		select {
		case <-load.Done():
			break feed
		case customers <- n:
		}
	}
	close(customers)
	wg.Wait()
}

func (w *workload) customer(ctx context.Context, n int) {
	tenant := fmt.Sprintf("tenant-%d", n%w.cfg.tenants)
	amount := 100 + rand.IntN(99_900)
	order := newIntent("createOrder", fmt.Sprintf("%s-order-%d", w.prefix, n), tenant, amount, "")
	w.perform(ctx, order)
	a, ok := order.result()
	if !ok || rand.Float64() >= w.cfg.payRate {
		return
	}
	var res orderResult
	if json.Unmarshal(a.data, &res) != nil || res.CreateOrder.ID == "" {
		return // a failed order: the audit reports it
	}
	pays := []*intent{newIntent("createPayment", fmt.Sprintf("%s-pay-%d", w.prefix, n), tenant, amount, res.CreateOrder.ID)}
	if rand.Float64() < w.cfg.conflictRate {
		p := newIntent("createPayment", fmt.Sprintf("%s-pay-%d-competing", w.prefix, n), tenant, amount, res.CreateOrder.ID)
		p.competing = true
		pays = append(pays, p)
	} else if rand.Float64() < w.cfg.noRetryRate {
		pays[0].noRetry = true
	}
	var wg sync.WaitGroup
	for _, p := range pays {
		wg.Go(func() { w.perform(ctx, p) })
	}
	wg.Wait()
}

// perform sends an intent: usually by one client; with cfg.dupRate by 2 to
// cfg.dupMax clients at once, each starting at a different server.
func (w *workload) perform(ctx context.Context, in *intent) {
	in.started = time.Now()
	w.reg.add(in)
	kind := in.field
	if in.competing {
		kind += " (competing)"
	}
	if in.noRetry {
		kind += " (no retry)"
	}
	w.stats.intents.add(kind)
	if in.noRetry {
		server := rand.IntN(w.client.fleet.size())
		if v := w.client.attempt(ctx, server, in.field, in.tenant, in.body, w.client.timeout(), 0); v.final {
			in.record(v, server)
			w.stats.answers.add(v.kind)
		}
		return
	}
	copies := 1
	if w.cfg.dupMax > 1 && rand.Float64() < w.cfg.dupRate {
		copies = 2 + rand.IntN(w.cfg.dupMax-1)
		w.stats.duplicated.Add(1)
		w.stats.copies.Add(int64(copies - 1))
	}
	first := rand.IntN(w.client.fleet.size())
	var wg sync.WaitGroup
	for c := range copies {
		wg.Go(func() { w.client.perform(ctx, in, first+c) })
	}
	wg.Wait()
}

// counter counts events by name.
type counter struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counter) add(name string) { c.addN(name, 1) }

func (c *counter) addN(name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[name] += n
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name]
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.m {
		n += v
	}
	return n
}

// String lists the counts, largest first.
func (c *counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := slices.Collect(maps.Keys(c.m))
	slices.SortFunc(names, func(a, b string) int {
		if c.m[a] != c.m[b] {
			return c.m[b] - c.m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, c.m[n])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// stats are the run's figures for the summary.
type stats struct {
	requests      atomic.Int64 // HTTP requests of the load (and the final rounds)
	auditRequests atomic.Int64 // the audit's replay requests
	intents       counter
	duplicated    atomic.Int64 // intents sent by several clients at once
	copies        atomic.Int64 // the extra copies of those
	answers       counter      // final answers by kind
	retries       counter      // retries by reason
	faults        counter      // faults injected, by kind

	mu     sync.Mutex
	events []event // the faults
}

// event is a fault, at its time since the start of the load.
type event struct {
	at   time.Duration
	text string
}

func (s *stats) event(at time.Duration, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, event{at, fmt.Sprintf(format, args...)})
}

// sortedEvents returns the faults in the order they happened.
func (s *stats) sortedEvents() []event {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := slices.Clone(s.events)
	slices.SortFunc(e, func(a, b event) int { return int(a.at - b.at) })
	return e
}
