package testapp

// Test support: the suites of this package (internal/testapp) and of idemctl
// run the test application through Bench. This file imports testing and is
// meant for _test.go files only; the application itself is in ent and graph.

import (
	"context"
	"net/http"
	"testing"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	_ "github.com/goovo/idem/internal/testkit/testapp/ent/runtime" // the idemschema mixin's interceptors and the fields' validators
	"github.com/goovo/idem/internal/testkit/testapp/ent/shipment"
	"github.com/goovo/idem/internal/testkit/testapp/graph"
)

// Bench is the test application of one test, on one backend: a fresh
// database, the gqlgen server with the idempotency hook installed, served
// over HTTP (the tenant is the X-Org header). Everything is closed by the
// test's cleanup.
type Bench struct {
	// DB is the test's database (idemtest.Open), set up with the
	// application's schema.
	DB *idemtest.DB
	// Client is the ent client over DB.
	Client *ent.Client
	// Resolver is the server's resolver: a test sets its Hook to make the
	// mutations fail, block or count their runs.
	Resolver *graph.Resolver
	// Clock is the hook's clock: a test advances it to expire leases and
	// retention windows.
	Clock *idem.ClockOffset
	// Hook is the hook that Server serves (Handler's latest): an Admin made
	// of it (idemctl.New) knows the schema's mutations.
	Hook *idem.Hook
	// Server serves the hook; a test may wrap Server.Config.Handler, or call
	// it directly.
	*testkit.Server

	t testing.TB
}

// NewBench starts the test application on a fresh database of b, with the
// hook configured by cfg. NewBench sets cfg's Backend, Tenant (the X-Org
// header) and Clock (Bench.Clock); a nil Logger writes the hook's warnings and errors to the test's log
// (testkit.Logger).
func NewBench(t testing.TB, b idemtest.Kind, cfg idem.Config) *Bench {
	t.Helper()
	db := idemtest.Open(t, b)
	client := ent.NewClient(ent.Driver(db.Driver))
	testkit.Setup(t, db, client.IdempotencyBackend(), client.Schema.Create)
	return newBench(t, db, client, cfg)
}

// NewBenchDatabaseSQL is NewBench with the application's ent client on
// database/sql (idemdb.OpenSQL), where NewBench's is on pgx on PostgreSQL: the
// path before the pipelined store, measured side by side with it.
func NewBenchDatabaseSQL(t testing.TB, b idemtest.Kind, cfg idem.Config) *Bench {
	t.Helper()
	db := idemtest.Open(t, b)
	setup := ent.NewClient(ent.Driver(db.Driver))
	testkit.Setup(t, db, setup.IdempotencyBackend(), setup.Schema.Create)
	drv, err := idemdb.OpenSQL(db.DSN, idemdb.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	testkit.CloseInCleanup(t, "the application's database/sql pool", func() { drv.Close() })
	return newBench(t, db, ent.NewClient(ent.Driver(drv)), cfg)
}

func newBench(t testing.TB, db *idemtest.DB, client *ent.Client, cfg idem.Config) *Bench {
	be := &Bench{t: t, DB: db, Client: client, Resolver: &graph.Resolver{Client: client}, Clock: &idem.ClockOffset{}}
	be.Server = testkit.Serve(t, be.Handler(client, be.Resolver, cfg), "", graph.OrgHeader)
	return be
}

// Handler returns the application's handler over client (Client, or
// another one, such as a client of a database that is down), with resolver
// and the hook configured by cfg as NewBench configures it.
func (be *Bench) Handler(client *ent.Client, resolver *graph.Resolver, cfg idem.Config) http.Handler {
	be.t.Helper()
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: resolver}))
	srv.AddTransport(transport.POST{})
	// The query cache is hook.Handler's (idemhttp.DocumentCache): without
	// one every request parses and validates its operation again.
	cfg.Backend = client.IdempotencyBackend()
	cfg.Tenant = graph.OrgFromContext
	cfg.Clock = be.Clock
	cfg.TenantContext = graph.OrgContext
	if cfg.Done == nil {
		// The recoverer, if on, stops before the database closes.
		done := make(chan struct{})
		be.t.Cleanup(func() { close(done) })
		cfg.Done = done
	}
	if cfg.Logger == nil {
		cfg.Logger = testkit.Logger(be.t)
	}
	hook, err := idem.New(cfg)
	if err != nil {
		be.t.Fatal(err)
	}
	h, err := hook.Handler(srv)
	if err != nil {
		be.t.Fatal(err)
	}
	be.Hook = hook
	return graph.WithOrg(h)
}

// CreateShipment is the mutation Post sends, with the variables k (the
// key) and g (the weight in grams).
const CreateShipment = `mutation($k: String!, $g: Int!) { createShipment(idempotencyKey: $k, input: {destination: "Lyon", weightGrams: $g}) { id destination weightGrams label } }`

// Post sends CreateShipment as org, with key and a weight of grams.
func (be *Bench) Post(org, key string, grams int) *testkit.Response {
	return be.GQL(org, CreateShipment, map[string]any{"k": key, "g": grams})
}

// Record returns the shipment (the idempotency record) of org's key,
// finished or not.
func (be *Bench) Record(org, key string) *ent.Shipment {
	be.t.Helper()
	s, err := be.Client.Shipment.Query().
		Where(shipment.Org(org), shipment.IdempotencyKey(key)).
		Only(idemschema.IncludeUnfinished(context.Background()))
	if err != nil {
		be.t.Fatalf("record %s/%s: %v", org, key, err)
	}
	return s
}

// Count counts the shipments, finished or not.
func (be *Bench) Count() int {
	be.t.Helper()
	n, err := be.Client.Shipment.Query().Count(idemschema.IncludeUnfinished(context.Background()))
	if err != nil {
		be.t.Fatal(err)
	}
	return n
}
