package idem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
	"github.com/goovo/idem/internal/testkit/testapp/graph"
)

// A document read from anything but JSON (here an application/graphql
// body; a GET query likewise) keeps the raw bytes of a string literal
// without escapes, which PostgreSQL cannot store when they are not UTF-8:
// the insert failed (IDEMPOTENCY_UNAVAILABLE, for ever) where SQLite stored
// them. The hook refuses them before anything runs, on every backend, as
// BAD_USER_INPUT; nothing is stored and the key is not spent.
func TestRawBytesInTheDocumentAreBadInput(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, b idemtest.Kind) {
		be, logs := loggedBench(t, b, idem.Config{})
		srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: be.Resolver}))
		srv.AddTransport(transport.GRAPHQL{})
		hook, err := idem.New(idem.Config{
			Backend: be.Client.IdempotencyBackend(), Tenant: graph.OrgFromContext,
			Logger: slog.New(slog.NewTextHandler(logs, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		h, err := hook.Handler(srv)
		if err != nil {
			t.Fatal(err)
		}
		s := httptest.NewServer(graph.WithOrg(h))
		t.Cleanup(s.Close)
		post := func(destination string) *testkit.Response {
			t.Helper()
			doc := `mutation { createShipment(idempotencyKey: "raw", input: {destination: "` + destination + `", weightGrams: 5}) { destination } }`
			req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(doc))
			req.Header.Set("Content-Type", "application/graphql")
			req.Header.Set(graph.OrgHeader, "org-1")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			r := &testkit.Response{}
			if r.Body, err = io.ReadAll(res.Body); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(r.Body, r); err != nil {
				t.Fatalf("%s: %v", r.Body, err)
			}
			return r
		}
		first, again := post("Z\xfcrich"), post("Z\xfcrich")
		if first.Code() != string(idemcode.BadUserInput) || !bytes.Equal(first.Body, again.Body) || be.Count() != 0 {
			t.Fatalf("Latin-1 in a literal:\n%s\n%s\n%d shipments", first.Body, again.Body, be.Count())
		}
		if r := post("Zürich"); len(r.Errors) > 0 || !strings.Contains(string(r.Data), "Zürich") {
			t.Fatalf("the same key with UTF-8: %s", r.Body)
		}
		if strings.Contains(logs.String(), "level=ERROR") {
			t.Fatalf("logged as an error:\n%s", logs)
		}
	})
}

// A tenant the database cannot store (the test application takes the X-Org
// header as it comes, and HTTP allows bytes that are not UTF-8 in it)
// failed every lookup on PostgreSQL, an outage for that caller for ever,
// and was stored on SQLite: it is UNAUTHENTICATED on every backend.
func TestTenantTheDatabaseCannotStoreIsRefused(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, b idemtest.Kind) {
		be, logs := loggedBench(t, b, idem.Config{})
		for range 2 {
			r := be.Post("org-\xff", "k", 100)
			if r.Code() != string(idemcode.Unauthenticated) {
				t.Fatalf("%s", r.Body)
			}
		}
		if be.Count() != 0 || strings.Contains(logs.String(), "level=ERROR") {
			t.Fatalf("%d shipments; log:\n%s", be.Count(), logs)
		}
	})
}

// Text the database cannot store that a resolver wrote itself (not the
// client's argument, which the hook refuses before anything runs) is the
// attempt's final answer, BAD_USER_INPUT without the database's words:
// stored, replayed to the retry, and logged as no outage. It was
// INTERNAL_SERVER_ERROR, released, and failed again on every retry and
// every run of the recoverer. PostgreSQL only: SQLite stores a NUL.
func TestUnstorableTextWrittenByTheResolverIsFinal(t *testing.T) {
	for _, b := range idemtest.Kinds() {
		if !b.IsPostgres() {
			continue
		}
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			be, logs := loggedBench(t, b, idem.Config{})
			runs := 0
			be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
				runs++
				return s.Update().SetLabel("label\x00from the carrier").Exec(ctx)
			}
			first := be.Post("org-1", "nul", 100)
			again := be.Post("org-1", "nul", 100)
			if first.Code() != string(idemcode.BadUserInput) || first.Outcome("createShipment") != idemcode.OutcomeExecuted ||
				!again.Replayed || !sameErrors(string(first.Body), string(again.Body)) || runs != 1 {
				t.Fatalf("%d runs:\n%s\n%s", runs, first.Body, again.Body)
			}
			for _, leak := range []string{"22021", "SQLSTATE", "0x00", "UTF8"} {
				if strings.Contains(string(first.Body), leak) {
					t.Fatalf("the client saw %q: %s", leak, first.Body)
				}
			}
			if strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "22021") {
				t.Fatalf("log:\n%s", logs)
			}
		})
	}
}
