package todoapp_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemgen/internal/todoapp/ent"
	"github.com/goovo/idem/idemgen/internal/todoapp/ent/todo"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
)

// With idemschema.Mixin{Isolate: true}, one tenant can neither read nor
// link to another tenant's rows, through any of entgql's entry points
// (lists, node, nodes, edge arguments of the generated and hand-written
// mutations, updates by id), and each refusal is the answer for an id that
// does not exist, so that nothing tells a tenant whether another's id
// exists.
func TestTenantIsolation(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b, idem.Config{})
		cat := a.createCategory("acme", "cat-1", "acme's")
		mine := a.createTodo("acme", "todo-1", "acme's", map[string]any{"categoryID": cat})
		theirs := a.createTodo("globex", "todo-1", "globex's", nil)
		missing := uuid.NewString()

		// Lists hold the caller's rows only.
		r := a.GQL("globex", `{ todos { id text } categories { id } }`, nil)
		if len(r.Errors) > 0 || strings.Contains(string(r.Body), "acme") || !strings.Contains(string(r.Body), theirs) ||
			string(field(t, r, "categories")) != "[]" {
			t.Fatalf("globex's lists: %s", r.Body)
		}
		// node and nodes: another tenant's id reads as a missing one.
		node := `query($id: ID!) { node(id: $id) { id ... on Todo { text } } }`
		own := a.GQL("acme", node, map[string]any{"id": mine})
		if len(own.Errors) > 0 || !strings.Contains(string(own.Body), "acme's") {
			t.Fatalf("acme's own node: %s", own.Body)
		}
		sameAnswer(t, "node",
			a.GQL("globex", node, map[string]any{"id": mine}),
			a.GQL("globex", node, map[string]any{"id": missing}))
		nodes := `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`
		sameAnswer(t, "nodes",
			a.GQL("globex", nodes, map[string]any{"ids": []string{mine}}),
			a.GQL("globex", nodes, map[string]any{"ids": []string{missing}}))

		// Links: the generated mutation's input, a hand-written mutation's
		// arguments.
		create := `mutation($key: String!, $in: CreateTodoInput!) { createTodo(idempotencyKey: $key, input: $in) { id } }`
		for _, edge := range []string{"categoryID", "parentID"} {
			target := cat
			if edge == "parentID" {
				target = mine
			}
			other := a.GQL("globex", create, map[string]any{"key": "link-" + edge, "in": map[string]any{"text": "x", edge: target}})
			none := a.GQL("globex", create, map[string]any{"key": "none-" + edge, "in": map[string]any{"text": "x", edge: missing}})
			if other.Code() != string(idemcode.BadUserInput) {
				t.Fatalf("createTodo linking %s to another tenant's row: %s", edge, other.Body)
			}
			sameAnswer(t, "createTodo "+edge, other, none)
		}
		quick := `mutation($key: String!, $parent: ID) { createQuickTodo(idempotencyKey: $key, text: "x", parentID: $parent) { id } }`
		sameAnswer(t, "createQuickTodo",
			a.GQL("globex", quick, map[string]any{"key": "q-1", "parent": mine}),
			a.GQL("globex", quick, map[string]any{"key": "q-2", "parent": missing}))
		// An update by id reaches the caller's rows only.
		complete := `mutation($key: String!, $id: ID!) { completeTodo(idempotencyKey: $key, id: $id) { id } }`
		other := a.GQL("globex", complete, map[string]any{"key": "c-1", "id": mine})
		if !strings.Contains(string(other.Body), "not found") {
			t.Fatalf("globex completing acme's todo: %s", other.Body)
		}
		sameAnswer(t, "completeTodo", other, a.GQL("globex", complete, map[string]any{"key": "c-2", "id": missing}))

		// Nothing of acme's changed, and globex has its one todo only.
		ctx := idemschema.AllTenants(context.Background())
		row := a.client.Todo.GetX(ctx, uuid.MustParse(mine))
		if row.Status != todo.StatusInProgress || len(a.client.Todo.QueryChildren(row).AllX(ctx)) != 0 {
			t.Fatalf("acme's todo changed: %+v", row)
		}
		if n := countTodos(t, a.client, "globex"); n != 1 {
			t.Fatalf("globex has %d todos, want 1", n)
		}

		// A request without a tenant reads nothing.
		anon := a.GQL("", `{ todos { id } }`, nil)
		if len(anon.Errors) == 0 || strings.Contains(string(anon.Body), mine) || strings.Contains(string(anon.Body), theirs) {
			t.Fatalf("anonymous query: %s", anon.Body)
		}
	})
}

// sameAnswer fails unless two responses refuse alike: the same errors,
// apart from the idempotency key they echo, and the same data.
func sameAnswer(t *testing.T, what string, other, missing *testkit.Response) {
	t.Helper()
	if len(other.Errors) == 0 {
		t.Fatalf("%s: another tenant's row was not refused: %s", what, other.Body)
	}
	strip := func(r *testkit.Response) string {
		errs := make([]testkit.Error, len(r.Errors))
		for i, e := range r.Errors {
			// A correlation id is new in every answer.
			msg := e.Message
			if id, ok := e.Extensions["correlationId"].(string); ok {
				msg = strings.ReplaceAll(msg, id, "…")
			}
			errs[i] = testkit.Error{Message: msg, Path: e.Path, Extensions: map[string]any{"code": e.Code()}}
		}
		b, _ := json.Marshal(struct {
			Data   json.RawMessage
			Errors []testkit.Error
		}{r.Data, errs})
		return string(b)
	}
	if strip(other) != strip(missing) {
		t.Fatalf("%s: another tenant's row and a missing row answer differently:\n%s\n%s", what, other.Body, missing.Body)
	}
}

// Outside GraphQL, ent code of an isolated entity needs a tenant in its
// context: idem.WithTenant limits it to that tenant's rows, new rows take
// the tenant, idemschema.AllTenants is for code that serves every tenant,
// and a context with neither fails rather than read every tenant's rows.
func TestIsolationOutsideGraphQL(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b, idem.Config{})
		bg := context.Background()
		acme, globex := idem.WithTenant(bg, "acme"), idem.WithTenant(bg, "globex")
		mine := a.client.Todo.Create().SetText("mine").SaveX(acme)
		if mine.TenantID != "acme" {
			t.Fatalf("a row created in acme's context belongs to %q", mine.TenantID)
		}
		a.client.Todo.Create().SetText("theirs").SaveX(globex)

		if _, err := a.client.Todo.Query().All(bg); !errors.Is(err, idemschema.ErrNoTenant) {
			t.Fatalf("query without a tenant: %v", err)
		}
		if n := a.client.Todo.Query().CountX(globex); n != 1 {
			t.Fatalf("globex sees %d todos, want 1", n)
		}
		if n := a.client.Todo.Query().CountX(idemschema.AllTenants(bg)); n != 2 {
			t.Fatalf("AllTenants sees %d todos, want 2", n)
		}
		if _, err := a.client.Todo.UpdateOneID(mine.ID).SetText("stolen").Save(globex); !ent.IsNotFound(err) {
			t.Fatalf("globex updating acme's todo: %v", err)
		}
		if n, err := a.client.Todo.Delete().Exec(globex); err != nil || n != 1 {
			t.Fatalf("globex deleting every todo deleted %d (%v), want its own 1", n, err)
		}
		if _, err := a.client.Todo.Create().SetText("x").SetParentID(mine.ID).Save(globex); !ent.IsConstraintError(err) {
			t.Fatalf("globex linking to acme's todo: %v", err)
		}
		if _, err := a.client.Todo.Create().SetText("x").SetTenantID("acme").Save(globex); err == nil {
			t.Fatal("globex created a todo of acme")
		}
		if got := a.client.Todo.GetX(acme, mine.ID); got.Text != "mine" {
			t.Fatalf("acme's todo is %+v", got)
		}
	})
}
