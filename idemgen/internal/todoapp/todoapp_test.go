package todoapp_test

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
	"time"

	"github.com/google/uuid"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemgen/internal/todoapp"
	"github.com/goovo/idem/idemgen/internal/todoapp/ent"
	"github.com/goovo/idem/idemgen/internal/todoapp/ent/category"
	"github.com/goovo/idem/idemgen/internal/todoapp/ent/todo"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
)

// app is the todo application of one test on one backend.
type app struct {
	t      *testing.T
	client *ent.Client
	h      http.Handler
}

// setupMu serializes ent's Schema.Create, which is not safe for concurrent
// use; the backends run in parallel.
var setupMu sync.Mutex

func newApp(t *testing.T, b idemtest.Backend, cfg idem.Config) *app {
	t.Helper()
	db := idemtest.Open(t, b)
	client := ent.NewClient(ent.Driver(db.Driver))
	setupMu.Lock()
	err := db.Setup(context.Background(), client.IdempotencyBackend(), client.Schema.Create)
	setupMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	h, err := todoapp.NewHandler(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &app{t: t, client: client, h: h}
}

func eachBackend(t *testing.T, test func(t *testing.T, b idemtest.Backend)) {
	for _, b := range idemtest.Backends() {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			test(t, b)
		})
	}
}

type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

type response struct {
	Body   []byte
	Data   map[string]json.RawMessage
	Errors []gqlError
}

func (r response) code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

// field decodes the data of one field into v.
func (r response) field(t *testing.T, name string, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Data[name], v); err != nil {
		t.Fatalf("%s: %v in %s", name, err, r.Body)
	}
}

// post sends a GraphQL request as tenant ("" for none).
func (a *app) post(tenant, query string, vars map[string]any) response {
	a.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req := httptest.NewRequest(http.MethodPost, "/query", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tenant != "" {
		req.Header.Set(todoapp.TenantHeader, tenant)
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	r := response{Body: rec.Body.Bytes()}
	var out struct {
		Data   map[string]json.RawMessage `json:"data"`
		Errors []gqlError                 `json:"errors"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil {
		a.t.Fatalf("response is not JSON: %s", r.Body)
	}
	r.Data, r.Errors = out.Data, out.Errors
	return r
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
	eachBackend(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b, idem.Config{})
		cat := a.createCategory("acme", "cat-1", "home")
		q := `mutation($key: String!, $in: CreateTodoInput!) { createTodo(idempotencyKey: $key, input: $in) { ` + todoFields + ` } }`
		in := map[string]any{"text": "water the plants", "priority": 3, "status": "COMPLETED", "labels": []string{"garden"}, "categoryID": cat}
		first := a.post("acme", q, map[string]any{"key": "todo-1", "in": in})
		second := a.post("acme", q, map[string]any{"key": "todo-1", "in": in})
		if len(first.Errors) > 0 || !bytes.Equal(first.Data["createTodo"], second.Data["createTodo"]) {
			t.Fatalf("replay:\n%s\n%s", first.Body, second.Body)
		}
		idemtest.RequireExecuted(t, first.Body, "createTodo")
		idemtest.RequireReplayed(t, second.Body, "createTodo")
		var got todoJSON
		first.field(t, "createTodo", &got)
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
	eachBackend(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b, idem.Config{})
		cat := a.createCategory("acme", "cat-1", "work")
		parent := a.createTodo("acme", "todo-0", "plan", nil)
		q := `mutation($key: String!, $cat: ID, $parent: ID) {
			createQuickTodo(idempotencyKey: $key, text: "write", priorityOrder: 7, status: COMPLETED, labels: ["a", "b"],
				categoryID: $cat, parentID: $parent, createdAt: "2001-02-03T04:05:06Z", blob: "secret") { ` + todoFields + ` } }`
		vars := map[string]any{"key": "quick-1", "cat": cat, "parent": parent}
		first := a.post("acme", q, vars)
		if len(first.Errors) > 0 {
			t.Fatalf("createQuickTodo: %s", first.Body)
		}
		idemtest.RequireReplayed(t, a.post("acme", q, vars).Body, "createQuickTodo")
		var got todoJSON
		first.field(t, "createQuickTodo", &got)
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
	eachBackend(t, func(t *testing.T, b idemtest.Backend) {
		a := newApp(t, b, idem.Config{})
		id := a.createTodo("acme", "todo-1", "call", nil)
		q := `mutation($id: ID!) { completeTodo(idempotencyKey: "done-1", id: $id) { status } }`
		first := a.post("acme", q, map[string]any{"id": id})
		idemtest.RequireExecuted(t, first.Body, "completeTodo")
		second := a.post("acme", q, map[string]any{"id": id})
		idemtest.RequireReplayed(t, second.Body, "completeTodo")
		if !bytes.Equal(first.Data["completeTodo"], second.Data["completeTodo"]) || !strings.Contains(string(first.Data["completeTodo"]), "COMPLETED") {
			t.Fatalf("complete:\n%s\n%s", first.Body, second.Body)
		}
		if n := a.client.IdempotencyRecord.Query().CountX(context.Background()); n != 1 {
			t.Fatalf("%d idempotency records, want 1", n)
		}
	})
}

func (a *app) createCategory(tenant, key, text string) string {
	a.t.Helper()
	r := a.post(tenant, `mutation($key: String, $text: String!) { createCategory(idempotencyKey: $key, input: {text: $text}) { id } }`,
		map[string]any{"key": key, "text": text})
	var c struct{ ID string }
	if len(r.Errors) > 0 {
		a.t.Fatalf("createCategory: %s", r.Body)
	}
	r.field(a.t, "createCategory", &c)
	return c.ID
}

// createTodo creates a todo with the generated mutation; in adds to its
// input.
func (a *app) createTodo(tenant, key, text string, in map[string]any) string {
	a.t.Helper()
	r := a.post(tenant, `mutation($key: String!, $in: CreateTodoInput!) { createTodo(idempotencyKey: $key, input: $in) { id } }`,
		map[string]any{"key": key, "in": withText(in, text)})
	var td struct{ ID string }
	if len(r.Errors) > 0 {
		a.t.Fatalf("createTodo: %s", r.Body)
	}
	r.field(a.t, "createTodo", &td)
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

var _ = category.Table
