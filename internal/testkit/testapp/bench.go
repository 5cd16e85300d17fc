package testapp

// Test support: the suites of this package (internal/testapp) and of idemctl
// run the test application through Bench. This file imports testing and is
// meant for _test.go files only; the application itself is in ent and graph.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
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
	// Server serves the hook; a test may wrap Server.Config.Handler, or call
	// it directly.
	Server *httptest.Server

	t testing.TB
}

// setupMu serializes the schema's creation: ent's Schema.Create is not safe
// for concurrent use (it writes the package's table descriptions), and the
// suites run their backends in parallel.
var setupMu sync.Mutex

// NewBench starts the test application on a fresh database of b, with the
// hook configured by cfg. NewBench sets cfg's Backend, Tenant (the X-Org
// header) and Clock (Bench.Clock); a nil Logger discards the hook's log.
func NewBench(t testing.TB, b idemtest.Backend, cfg idem.Config) *Bench {
	t.Helper()
	db := idemtest.Open(t, b)
	client := ent.NewClient(ent.Driver(db.Driver))
	setupMu.Lock()
	err := db.Setup(context.Background(), client.IdempotencyBackend(), client.Schema.Create)
	setupMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	be := &Bench{t: t, DB: db, Client: client, Resolver: &graph.Resolver{Client: client}, Clock: &idem.ClockOffset{}}
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: be.Resolver}))
	srv.AddTransport(transport.POST{})
	// As a production server does (handler.NewDefaultServer sets one):
	// without it every request parses and validates its operation again.
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	cfg.Backend = client.IdempotencyBackend()
	cfg.Tenant = graph.OrgFromContext
	cfg.Clock = be.Clock
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	h, err := idem.Install(srv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	be.Server = httptest.NewServer(graph.WithOrg(h))
	t.Cleanup(be.Server.Close)
	return be
}

// CreateShipment is the mutation Post sends, with the variables k (the
// key) and g (the weight in grams).
const CreateShipment = `mutation($k: String!, $g: Int!) { createShipment(idempotencyKey: $k, input: {destination: "Lyon", weightGrams: $g}) { id destination weightGrams label } }`

// Result is a GraphQL response as the client received it.
type Result struct {
	Data   json.RawMessage
	Errors []struct {
		Message    string
		Extensions map[string]any
	}
	Extensions struct {
		Idempotency map[string]idem.FieldReport
	}
	// Replayed is the Idempotent-Replayed header.
	Replayed bool
	// Body is the response body as received.
	Body string
}

// Outcome is the hook's report on createShipment (extensions.idempotency).
func (r Result) Outcome() string { return r.Extensions.Idempotency["createShipment"].Outcome }

// Code returns the code of the first error, or "" if there is none.
func (r Result) Code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	s, _ := r.Errors[0].Extensions["code"].(string)
	return s
}

// Post sends CreateShipment as org, with key and a weight of grams.
func (be *Bench) Post(org, key string, grams int) Result {
	return be.GQL(org, CreateShipment, map[string]any{"k": key, "g": grams})
}

// GQL sends a GraphQL request as org. A request that fails or an answer
// that is not JSON marks the test failed (with t.Error, so that GQL may be
// called from any goroutine) and returns what it has.
func (be *Bench) GQL(org, query string, vars map[string]any) Result {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, be.Server.URL, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Org", org)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		be.t.Error(err)
		return Result{}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var r Result
	if err := json.Unmarshal(raw, &r); err != nil {
		be.t.Errorf("decode %s: %v", raw, err)
	}
	r.Body = string(raw)
	r.Replayed = res.Header.Get(idem.HeaderReplayed) == "true"
	return r
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
