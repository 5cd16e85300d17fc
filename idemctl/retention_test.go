package idemctl_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goovo/idem/idemctl"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/testapp/graph"
)

// Given the application's schema (Command.Schema), the command line knows
// each mutation's retention: inspect states a short-lived record's own
// window, and the sweep archives it once that has passed. Without it, the
// command archives by the entity's retention and says that a mutation's
// may end a window sooner.
func TestCommandWithTheSchemaKnowsEachMutationsRetention(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		be := newBench(t, b)
		created := be.Post("org-1", "ship", 100)
		var d struct{ CreateShipment struct{ ID string } }
		if err := json.Unmarshal(created.Data, &d); err != nil || d.CreateShipment.ID == "" {
			t.Fatalf("create: %s", created.Body)
		}
		for field, key := range map[string]string{"approveShipmentBrief": "brief", "approveShipment": "long"} {
			r := be.GQL("org-1", `mutation($k: String!, $id: ID!) { `+field+`(idempotencyKey: $k, id: $id) { id } }`,
				map[string]any{"k": key, "id": d.CreateShipment.ID})
			if len(r.Errors) > 0 {
				t.Fatalf("%s: %s", field, r.Body)
			}
		}
		withSchema := idemctl.Command{Config: be.cliConfig(), Schema: graph.NewExecutableSchema(graph.Config{Resolvers: be.Resolver})}
		withoutSchema := idemctl.Command{Config: be.cliConfig()}

		if r := runCommand(withSchema, "inspect", "-tenant", "org-1", "-key", "brief").ok(t); !regexp.MustCompile(`replays the stored response until \S+\n`).MatchString(r.stdout) {
			t.Fatalf("inspect, with the schema, inside the hour:\n%s", r)
		}
		be.Clock.Advance(time.Hour + time.Minute)
		if r := runCommand(withoutSchema, "inspect", "-tenant", "org-1", "-key", "brief").ok(t); !strings.Contains(r.stdout, "at the latest (its mutation's retentionSeconds, if any, ends it sooner)") {
			t.Fatalf("inspect, without the schema:\n%s", r)
		}
		if r := runCommand(withSchema, "inspect", "-tenant", "org-1", "-key", "brief").ok(t); !strings.Contains(r.stdout, "IDEMPOTENCY_KEY_EXPIRED (past retention since") {
			t.Fatalf("inspect, with the schema, past the hour:\n%s", r)
		}
		if r := runCommand(withSchema, "inspect", "-tenant", "org-1", "-key", "long").ok(t); !strings.Contains(r.stdout, "replays the stored response until") || strings.Contains(r.stdout, "at the latest") {
			t.Fatalf("inspect, with the schema, the table's other mutation:\n%s", r)
		}

		var doc sweepDoc
		runCommand(withoutSchema, "-json", "sweep").ok(t).json(t, &doc)
		if doc.Archived != 0 {
			t.Fatalf("a sweep without the schema: %+v", doc)
		}
		doc = sweepDoc{}
		runCommand(withSchema, "-json", "sweep").ok(t).json(t, &doc)
		if doc.Archived != 1 {
			t.Fatalf("a sweep with the schema: %+v", doc)
		}
		if r := runCommand(withSchema, "inspect", "-tenant", "org-1", "-key", "brief").ok(t); !strings.Contains(r.stdout, "tombstone") {
			t.Fatalf("inspect after the sweep:\n%s", r)
		}
	})
}
