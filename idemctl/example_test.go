package idemctl_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	_ "github.com/goovo/idem/internal/testkit/testapp/ent/runtime"
	"github.com/goovo/idem/internal/testkit/testapp/graph"
)

// Count the records of a database by state, as one JSON document. Two
// mutations made the records: a shipment, which succeeded, and the
// approval of a shipment that does not exist, a final error.
func Example() {
	dir, _ := os.MkdirTemp("", "idemctl-example")
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
	hook, err := idem.New(idem.Config{
		Backend: client.IdempotencyBackend(),
		Tenant:  graph.OrgFromContext,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	h, err := hook.Handler(srv)
	if err != nil {
		log.Fatal(err)
	}
	for _, q := range []string{
		`mutation { createShipment(idempotencyKey: "ship-1", input: {destination: "Lyon", weightGrams: 900}) { id } }`,
		`mutation { approveShipment(idempotencyKey: "approve-1", id: "00000000-0000-0000-0000-000000000000") { id } }`,
	} {
		req := httptest.NewRequest(http.MethodPost, "/query", strings.NewReader(`{"query":`+quote(q)+`}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Org", "acme")
		graph.WithOrg(h).ServeHTTP(httptest.NewRecorder(), req)
	}

	code := idemctl.Command{Config: hook.Config()}.Run(context.Background(), []string{"-json", "stats"}, os.Stdout, os.Stderr)
	if code != idemctl.ExitOK {
		log.Fatalf("exit code %d", code)
	}
	// Output:
	// {
	//   "tables": [
	//     {
	//       "entity": "IdempotencyRecord",
	//       "table": "idempotency_records",
	//       "pending": 0,
	//       "succeeded": 0,
	//       "failed": 1,
	//       "tombstones": 0
	//     },
	//     {
	//       "entity": "Shipment",
	//       "table": "shipments",
	//       "pending": 0,
	//       "succeeded": 1,
	//       "failed": 0,
	//       "tombstones": 0
	//     }
	//   ],
	//   "archivedRecords": 0,
	//   "archiveBytes": 0
	// }
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
	hook, err := idem.New(idem.Config{Backend: client.IdempotencyBackend(), Tenant: graph.OrgFromContext, Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	h, err := hook.Handler(srv)
	if err != nil {
		log.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/query", strings.NewReader(
		`{"query":"mutation { createShipment(idempotencyKey: \"k\", input: {destination: \"Oslo\", weightGrams: 5}) { id } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Org", "acme")
	graph.WithOrg(h).ServeHTTP(httptest.NewRecorder(), req)

	admin := idemctl.New(hook)    // the hook's retention, lease and clock
	clock.Advance(25 * time.Hour) // past the default 24 h retention
	report, err := admin.Sweep(context.Background(), idemctl.SweepOptions{})
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
		hook, err := idem.New(idem.Config{Backend: client.IdempotencyBackend()}) // no Tenant: no server
		if err != nil {
			log.Fatal(err)
		}
		admin := idemctl.New(hook)
		fmt.Println("reachable:", admin.Ping(context.Background()) == nil)
		client.Close()
	}
	// Output:
	// reachable: true
	// reachable: false
}
