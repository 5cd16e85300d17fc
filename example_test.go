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

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	_ "github.com/goovo/idem/internal/testkit/testapp/ent/runtime"
	"github.com/goovo/idem/internal/testkit/testapp/graph"
)

// Put the hook on a gqlgen server and send the same mutation twice: the
// second request is answered from the record.
func ExampleHook_Handler() {
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
	hook, err := idem.New(idem.Config{
		Backend: client.IdempotencyBackend(),
		Tenant:  graph.OrgFromContext, // the application's authentication
	})
	if err != nil {
		log.Fatal(err)
	}
	h, err := hook.Handler(srv)
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
				Idempotency map[string]idemcode.FieldReport
			}
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &res)
		fmt.Printf("%s %s Idempotent-Replayed=%q\n", res.Data, res.Extensions.Idempotency["createShipment"].Outcome, rec.Header().Get(idemcode.HeaderReplayed))
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
