package testapp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testapp/ent"
	_ "github.com/goovo/idem/internal/testapp/ent/runtime"
	"github.com/goovo/idem/internal/testapp/graph"
)

func newServer(t *testing.T, b idemtest.Backend) (*httptest.Server, *ent.Client) {
	db := idemtest.Open(t, b)
	client := ent.NewClient(ent.Driver(db.Driver))
	if err := client.Schema.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Client: client}}))
	srv.AddTransport(transport.POST{})
	h, err := idem.Install(srv, idem.Config{
		Backend: client.IdempotencyBackend(),
		Tenant:  graph.OrgFromContext,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(graph.WithOrg(h))
	t.Cleanup(s.Close)
	return s, client
}

type result struct {
	Data     json.RawMessage
	Errors   []struct{ Extensions map[string]any }
	Replayed bool
}

func (r result) code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	s, _ := r.Errors[0].Extensions["code"].(string)
	return s
}

func post(t *testing.T, s *httptest.Server, org, key string, grams int) result {
	body, _ := json.Marshal(map[string]any{
		"query":     `mutation($k: String!, $g: Int!) { createShipment(idempotencyKey: $k, input: {destination: "Lyon", weightGrams: $g}) { id destination weightGrams } }`,
		"variables": map[string]any{"k": key, "g": grams},
	})
	req, _ := http.NewRequest(http.MethodPost, s.URL, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Org", org)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return result{}
	}
	defer res.Body.Close()
	var r result
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		t.Error(err)
	}
	r.Replayed = res.Header.Get(idem.HeaderReplayed) == "true"
	return r
}

func count(t *testing.T, c *ent.Client) int {
	n, err := c.Shipment.Query().Count(idemschema.IncludeUnfinished(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The generator is general: another entity, with UUID ids and its own
// tenant field as the scope, gets the same behaviour.
func TestGeneratedMutationOnAnotherEntity(t *testing.T) {
	for _, b := range idemtest.Backends() {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			s, client := newServer(t, b)
			first := post(t, s, "org-1", "ship-1", 1500)
			second := post(t, s, "org-1", "ship-1", 1500)
			if len(first.Errors) > 0 || first.Replayed || !bytes.Equal(first.Data, second.Data) || !second.Replayed {
				t.Fatalf("replay:\n%+v\n%+v", first, second)
			}
			other := post(t, s, "org-2", "ship-1", 1500)
			if len(other.Errors) > 0 || other.Replayed || bytes.Equal(other.Data, first.Data) {
				t.Fatalf("another org with the same key: %+v", other)
			}
			if r := post(t, s, "org-1", "ship-1", 2000); r.code() != string(idem.CodeKeyReused) {
				t.Fatalf("reused key: %+v", r)
			}
			// The entity's own validator rejects the input at the claim:
			// nothing is stored, the answer says why.
			if r := post(t, s, "org-1", "ship-2", 0); r.code() != string(idem.CodeBadInput) {
				t.Fatalf("invalid weight: %+v", r)
			}
			if n := count(t, client); n != 2 {
				t.Fatalf("%d shipments, want 2", n)
			}
			orgs, err := client.Shipment.Query().Select("org").Strings(context.Background())
			if err != nil || strings.Join(orgs, ",") != "org-1,org-2" && strings.Join(orgs, ",") != "org-2,org-1" {
				t.Fatalf("scope field not set from the context: %v %v", orgs, err)
			}
		})
	}
}

// Atomic mode: concurrent duplicates wait for the first and replay its
// result; none is told to come back later.
func TestAtomicModeDuplicatesReplay(t *testing.T) {
	for _, b := range idemtest.Backends() {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			s, client := newServer(t, b)
			const n = 100
			results := make([]result, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					results[i] = post(t, s, "org-1", "atomic-storm", 750)
				})
			}
			close(start)
			wg.Wait()
			replays := 0
			for i, r := range results {
				if len(r.Errors) > 0 || !bytes.Equal(r.Data, results[0].Data) {
					t.Fatalf("response %d differs: %+v vs %+v", i, r, results[0])
				}
				if r.Replayed {
					replays++
				}
			}
			if replays != n-1 {
				t.Fatalf("%d replays, want %d", replays, n-1)
			}
			if got := count(t, client); got != 1 {
				t.Fatalf("%d shipments, want 1", got)
			}
		})
	}
}
