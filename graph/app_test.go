package graph_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/example/provider"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/exampletest"
)

// app is the example server of one test, on one backend
// (internal/testkit/exampletest), with the requests this suite sends.
type app struct {
	*exampletest.App
	t        testing.TB
	clock    *idem.ClockOffset
	provider *abandoning
}

type appOption func(*graph.Options)

func newApp(t testing.TB, backend idemtest.Kind, opts ...appOption) *app {
	t.Helper()
	return startApp(t, backend, 0, opts...)
}

// startApp starts the app with its client on a pool of maxConns
// connections (0: the default), and the hook's log in the test's.
func startApp(t testing.TB, backend idemtest.Kind, maxConns int, opts ...appOption) *app {
	t.Helper()
	clock := &idem.ClockOffset{}
	o := graph.Options{Clock: clock, Logger: testkit.Logger(t)}
	for _, opt := range opts {
		opt(&o)
	}
	p := &abandoning{giveUp: map[string]func(){}}
	a := &app{t: t, clock: clock, provider: p}
	a.App = exampletest.Start(t, backend, exampletest.Config{Options: o, MaxConns: maxConns,
		Provider: func(sim *provider.Simulated) provider.Provider { p.Simulated = sim; return p }})
	return a
}

// abandoning is the provider of the suite's apps: the simulated one, where
// the first charge of a key that abandonPayment names makes its client hang
// up as soon as the money is charged, and then loses the provider's answer
// (a retryable error) once the client has gone: the attempt is rolled back
// and its claim released, charged but not recorded. That is the article's
// partial success on any machine. (A client that only hangs up no longer
// aborts its attempt: the server finishes it.)
type abandoning struct {
	*provider.Simulated
	mu     sync.Mutex
	giveUp map[string]func() // by key
}

// abandon makes the next charge of key call giveUp once charged; giveUp
// returns once the client has gone.
func (p *abandoning) abandon(key string, giveUp func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.giveUp[key] = giveUp
}

// errAnswerLost is the provider's answer lost after it charged.
var errAnswerLost = errors.New("provider: the connection broke before the charge's answer")

// Charge implements provider.Provider.
func (p *abandoning) Charge(ctx context.Context, req provider.ChargeRequest) (*provider.Charge, error) {
	c, err := p.Simulated.Charge(ctx, req)
	if err != nil {
		return c, err
	}
	p.mu.Lock()
	giveUp := p.giveUp[req.Key]
	delete(p.giveUp, req.Key)
	p.mu.Unlock()
	if giveUp == nil {
		return c, nil
	}
	giveUp()
	return nil, errAnswerLost
}

// do sends a GraphQL request as tenant ("" for none).
func (a *app) do(tenant, query string, vars map[string]any) *testkit.Response {
	a.t.Helper()
	r, err := a.Send(tenant, query, vars, nil)
	if err != nil {
		a.t.Fatalf("request: %v", err)
	}
	return r
}

const createOrder = `mutation($key: String!, $amount: Int!, $currency: String!) {
  createOrder(idempotencyKey: $key, input: {amount: $amount, currency: $currency}) { id amount currency paid }
}`

const createPayment = `mutation($key: String!, $order: ID!, $amount: Int!) {
  createPayment(idempotencyKey: $key, input: {orderID: $order, amount: $amount}) {
    id amount providerChargeID order { id paid payments { id amount } }
  }
}`

// newOrder creates an order of amount EUR for tenant and returns its id.
func (a *app) newOrder(tenant string, amount int) string {
	a.t.Helper()
	r := a.do(tenant, createOrder, map[string]any{"key": "order-" + randomKey(), "amount": amount, "currency": "EUR"})
	var data struct {
		CreateOrder struct{ ID string } `json:"createOrder"`
	}
	if err := json.Unmarshal(r.Data, &data); err != nil || data.CreateOrder.ID == "" {
		a.t.Fatalf("createOrder: %s", r.Body)
	}
	return data.CreateOrder.ID
}

func (a *app) pay(tenant, key, orderID string, amount int) *testkit.Response {
	a.t.Helper()
	return a.do(tenant, createPayment, map[string]any{"key": key, "order": orderID, "amount": amount})
}

// allPayments counts payment rows, finished or not.
func (a *app) allPayments() int {
	a.t.Helper()
	n, err := a.Client.Payment.Query().Count(idemschema.IncludeUnfinished(context.Background()))
	if err != nil {
		a.t.Fatalf("count payments: %v", err)
	}
	return n
}

// charges returns the provider's charges of an order.
func (a *app) charges(tenant, orderID string) []*provider.Charge {
	a.t.Helper()
	var id int
	fmt.Sscan(orderID, &id)
	cs, err := a.Provider.Charges(context.Background(), tenant, id)
	if err != nil {
		a.t.Fatalf("charges: %v", err)
	}
	return cs
}

func randomKey() string { return rand.Text() }

// crossTenantRefusal is the code of a request that refers to another
// tenant's row: the claim refuses it as it refuses a reference to no row
// (BAD_USER_INPUT), on plain tables by the schema's hooks
// (ent/schema/tenantref.go), on tables partitioned by tenant by the
// composite foreign key; the resolver never runs.
func crossTenantRefusal(idemtest.Kind, string) string {
	return string(idemcode.BadUserInput)
}
