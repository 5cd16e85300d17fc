package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemhttp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	_ "github.com/goovo/idem/internal/testkit/testapp/ent/runtime"
	"github.com/goovo/idem/internal/testkit/testapp/graph"
)

// Install the hook on a gqlgen server and send the same mutation twice: the
// second request is answered from the record.
func ExampleInstall() {
	dir, _ := os.MkdirTemp("", "idem-example")
	defer os.RemoveAll(dir)
	drv, err := idemdb.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	client := ent.NewClient(ent.Driver(drv))
	defer client.Close()
	if err := client.Schema.Create(context.Background()); err != nil {
		log.Fatal(err)
	}

	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Client: client}}))
	srv.AddTransport(transport.POST{})
	h, err := idem.Install(srv, idem.Config{
		Backend: client.IdempotencyBackend(),
		Tenant:  graph.OrgFromContext, // the application's authentication
	})
	if err != nil {
		log.Fatal(err)
	}
	h = graph.WithOrg(h)

	mutation := `{"query":"mutation { createShipment(idempotencyKey: \"ship-42\", input: {destination: \"Lyon\", weightGrams: 900}) { destination label } }"}`
	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/query", strings.NewReader(mutation))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Org", "acme")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var res struct {
			Data       json.RawMessage
			Extensions struct {
				Idempotency map[string]idemhttp.FieldReport
			}
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &res)
		fmt.Printf("%s %s Idempotent-Replayed=%q\n", res.Data, res.Extensions.Idempotency["createShipment"].Outcome, rec.Header().Get(idemhttp.HeaderReplayed))
	}
	// Output:
	// {"createShipment":{"destination":"Lyon","label":"attempt-1"}} executed Idempotent-Replayed=""
	// {"createShipment":{"destination":"Lyon","label":"attempt-1"}} replayed Idempotent-Replayed="true"
}

// A resolver passes the key to the systems it calls outside the database,
// so that they can deduplicate a retry after a crash.
func ExampleKeyFromContext() {
	charge := func(ctx context.Context, amount int) string {
		key, ok := idem.KeyFromContext(ctx)
		if !ok {
			return "not in an idempotent mutation"
		}
		return fmt.Sprintf("POST /v1/charges amount=%d Idempotency-Key: %s", amount, key)
	}
	fmt.Println(charge(context.Background(), 1200))
	// Output: not in an idempotent mutation
}

// Sweep moves the responses of records past their retention window to the
// archive, leaving tombstones that keep refusing the key.
func ExampleAdmin_Sweep() {
	dir, _ := os.MkdirTemp("", "idem-sweep")
	defer os.RemoveAll(dir)
	drv, err := idemdb.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	client := ent.NewClient(ent.Driver(drv))
	defer client.Close()
	if err := client.Schema.Create(context.Background()); err != nil {
		log.Fatal(err)
	}
	clock := &idem.ClockOffset{} // the tests' way to move the database clock
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Client: client}}))
	srv.AddTransport(transport.POST{})
	h, err := idem.Install(srv, idem.Config{Backend: client.IdempotencyBackend(), Tenant: graph.OrgFromContext, Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/query", strings.NewReader(
		`{"query":"mutation { createShipment(idempotencyKey: \"k\", input: {destination: \"Oslo\", weightGrams: 5}) { id } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Org", "acme")
	graph.WithOrg(h).ServeHTTP(httptest.NewRecorder(), req)

	admin, err := idem.NewAdmin(idem.Config{Backend: client.IdempotencyBackend(), Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	clock.Advance(25 * time.Hour) // past the default 24 h retention
	report, err := admin.Sweep(context.Background(), idem.SweepOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("archived:", report.Archived())
	records, _ := admin.Inspect(context.Background(), "acme", "k")
	for _, r := range records {
		fmt.Println(r.Entity, r.State, r.Status)
	}
	// Output:
	// archived: 1
	// Shipment tombstone succeeded
	// Shipment archived succeeded
}

// Ping checks that the database can be reached before an operator's
// command runs; its error names the database's own problem (for people,
// never for clients).
func ExampleAdmin_Ping() {
	dir, _ := os.MkdirTemp("", "idem-ping")
	defer os.RemoveAll(dir)
	for _, path := range []string{filepath.Join(dir, "app.db"), filepath.Join(dir, "no-such-directory", "app.db")} {
		drv, err := idemdb.Open(path)
		if err != nil {
			log.Fatal(err)
		}
		client := ent.NewClient(ent.Driver(drv))
		admin, err := idem.NewAdmin(idem.Config{Backend: client.IdempotencyBackend()})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("reachable:", admin.Ping(context.Background()) == nil)
		client.Close()
	}
	// Output:
	// reachable: true
	// reachable: false
}
