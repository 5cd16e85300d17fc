package todoapp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemgen/internal/todoapp"
	"github.com/goovo/idem/idemgen/internal/todoapp/ent"
	"github.com/goovo/idem/idemgen/internal/todoapp/ent/todo"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
)

// app is the todo application of one test on one backend, served over
// HTTP.
type app struct {
	*testkit.Server
	t      *testing.T
	client *ent.Client
}

func newApp(t *testing.T, b idemtest.Kind, cfg idem.Config) *app {
	t.Helper()
	db := idemtest.Open(t, b)
	client := ent.NewClient(ent.Driver(db.Driver))
	testkit.Setup(t, db, client.IdempotencyBackend(), client.Schema.Create)
	return &app{Server: serve(t, todoapp.Schema(client), client, cfg), t: t, client: client}
}

// serve serves es over client with the hook configured by cfg, whose nil
// Logger writes the hook's warnings and errors to the test's log.
func serve(t *testing.T, es graphql.ExecutableSchema, client *ent.Client, cfg idem.Config) *testkit.Server {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testkit.Logger(t)
	}
	h, err := todoapp.Serve(es, client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return testkit.Serve(t, h, "", todoapp.TenantHeader)
}

// field returns the data of one field of r.
func field(t *testing.T, r *testkit.Response, name string) json.RawMessage {
	t.Helper()
	var data map[string]json.RawMessage
	if err := json.Unmarshal(r.Data, &data); err != nil {
		t.Fatalf("data: %v in %s", err, r.Body)
	}
	return data[name]
}

// decodeField decodes the data of one field of r into v.
func decodeField(t *testing.T, r *testkit.Response, name string, v any) {
	t.Helper()
	if err := json.Unmarshal(field(t, r, name), v); err != nil {
		t.Fatalf("%s: %v in %s", name, err, r.Body)
	}
}

type todoJSON struct {
	ID            string   `json:"id"`
	Text          string   `json:"text"`
	PriorityOrder int      `json:"priorityOrder"`
	Status        string   `json:"status"`
	Labels        []string `json:"labels"`
	CategoryID    *string  `json:"categoryID"`
	CreatedAt     string   `json:"createdAt"`
}

const todoFields = `id text priorityOrder status labels categoryID createdAt`

// The generated createTodo takes entgql's create input of an entity with
// UUID ids, an enum, a JSON field, a field renamed with entgql.MapsTo and
// edges, and replays it.
func TestGeneratedCreateOnAForeignSchema(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b, idem.Config{})
		cat := a.createCategory("acme", "cat-1", "home")
		q := `mutation($key: String!, $in: CreateTodoInput!) { createTodo(idempotencyKey: $key, input: $in) { ` + todoFields + ` } }`
		in := map[string]any{"text": "water the plants", "priority": 3, "status": "COMPLETED", "labels": []string{"garden"}, "categoryID": cat}
		first := a.GQL("acme", q, map[string]any{"key": "todo-1", "in": in})
		second := a.GQL("acme", q, map[string]any{"key": "todo-1", "in": in})
		if len(first.Errors) > 0 || !bytes.Equal(first.Data, second.Data) {
			t.Fatalf("replay:\n%s\n%s", first.Body, second.Body)
		}
		idemtest.RequireExecuted(t, first.Body, "createTodo")
		idemtest.RequireReplayed(t, second.Body, "createTodo")
		var got todoJSON
		decodeField(t, first, "createTodo", &got)
		if _, err := uuid.Parse(got.ID); err != nil || got.PriorityOrder != 3 || got.Status != "COMPLETED" ||
			len(got.Labels) != 1 || got.Labels[0] != "garden" || got.CategoryID == nil || *got.CategoryID != cat {
			t.Fatalf("todo %+v", got)
		}
		idemtest.RequireState(t, a.client.IdempotencyBackend(), "acme", "todo-1", idemtest.Succeeded)
	})
}

// A hand-written mutation whose records are Todo rows sets the Todo's
// fields from its arguments by their GraphQL names (priorityOrder is the
// priority field's entgql.MapsTo name), with their Go types, and never sets
// a field entgql skips on create (createdAt, blob) from an argument of the
// same name.
func TestHandWrittenMutationMapsArgumentsByGraphQLName(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b, idem.Config{})
		cat := a.createCategory("acme", "cat-1", "work")
		parent := a.createTodo("acme", "todo-0", "plan", nil)
		q := `mutation($key: String!, $cat: ID, $parent: ID) {
			createQuickTodo(idempotencyKey: $key, text: "write", priorityOrder: 7, status: COMPLETED, labels: ["a", "b"],
				categoryID: $cat, parentID: $parent, createdAt: "2001-02-03T04:05:06Z", blob: "secret") { ` + todoFields + ` } }`
		vars := map[string]any{"key": "quick-1", "cat": cat, "parent": parent}
		first := a.GQL("acme", q, vars)
		if len(first.Errors) > 0 {
			t.Fatalf("createQuickTodo: %s", first.Body)
		}
		idemtest.RequireReplayed(t, a.GQL("acme", q, vars).Body, "createQuickTodo")
		var got todoJSON
		decodeField(t, first, "createQuickTodo", &got)
		row := a.client.Todo.Query().Where(todo.ID(uuid.MustParse(got.ID))).WithParent().OnlyX(idemschema.AllTenants(context.Background()))
		switch {
		case row.Text != "write" || row.Priority != 7 || row.Status != todo.StatusCompleted || strings.Join(row.Labels, ",") != "a,b":
			t.Fatalf("fields not set from the arguments: %+v", row)
		case row.CategoryID.String() != cat || row.Edges.Parent == nil || row.Edges.Parent.ID.String() != parent:
			t.Fatalf("edges not set from the arguments: %+v", row)
		case row.Blob != nil:
			t.Fatalf("blob, which entgql skips, was set from an argument: %q", row.Blob)
		case row.CreatedAt.Year() == 2001 || time.Since(row.CreatedAt) > time.Hour:
			t.Fatalf("created_at, which entgql skips on create, was set from an argument: %v", row.CreatedAt)
		}
	})
}

// A hand-written mutation that names no record entity keeps its records in
// IdempotencyRecord, and replays.
func TestHandWrittenMutationWithTheDefaultRecordEntity(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b, idem.Config{})
		id := a.createTodo("acme", "todo-1", "call", nil)
		q := `mutation($id: ID!) { completeTodo(idempotencyKey: "done-1", id: $id) { status } }`
		first := a.GQL("acme", q, map[string]any{"id": id})
		idemtest.RequireExecuted(t, first.Body, "completeTodo")
		second := a.GQL("acme", q, map[string]any{"id": id})
		idemtest.RequireReplayed(t, second.Body, "completeTodo")
		if !bytes.Equal(first.Data, second.Data) || !strings.Contains(string(first.Data), "COMPLETED") {
			t.Fatalf("complete:\n%s\n%s", first.Body, second.Body)
		}
		if n := a.client.IdempotencyRecord.Query().CountX(context.Background()); n != 1 {
			t.Fatalf("%d idempotency records, want 1", n)
		}
	})
}

func (a *app) createCategory(tenant, key, text string) string {
	a.t.Helper()
	r := a.GQL(tenant, `mutation($key: String, $text: String!) { createCategory(idempotencyKey: $key, input: {text: $text}) { id } }`,
		map[string]any{"key": key, "text": text})
	var c struct{ ID string }
	if len(r.Errors) > 0 {
		a.t.Fatalf("createCategory: %s", r.Body)
	}
	decodeField(a.t, r, "createCategory", &c)
	return c.ID
}

// createTodo creates a todo with the generated mutation; in adds to its
// input.
func (a *app) createTodo(tenant, key, text string, in map[string]any) string {
	a.t.Helper()
	r := a.GQL(tenant, `mutation($key: String!, $in: CreateTodoInput!) { createTodo(idempotencyKey: $key, input: $in) { id } }`,
		map[string]any{"key": key, "in": withText(in, text)})
	var td struct{ ID string }
	if len(r.Errors) > 0 {
		a.t.Fatalf("createTodo: %s", r.Body)
	}
	decodeField(a.t, r, "createTodo", &td)
	return td.ID
}

func withText(in map[string]any, text string) map[string]any {
	out := map[string]any{"text": text}
	for k, v := range in {
		out[k] = v
	}
	return out
}

// The tables' rows of a tenant, read past isolation.
func countTodos(t *testing.T, c *ent.Client, tenant string) int {
	t.Helper()
	return c.Todo.Query().Where(todo.TenantID(tenant)).CountX(idemschema.AllTenants(context.Background()))
}

func countCategories(t *testing.T, c *ent.Client) int {
	t.Helper()
	return c.Category.Query().CountX(idemschema.AllTenants(context.Background()))
}
