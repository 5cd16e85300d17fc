package todoapp_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemgen/internal/todoapp"
	"github.com/goovo/idem/idemgen/internal/todoapp/ent/category"
	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/directive"
	"github.com/goovo/idem/internal/testkit"
)

const createCategoryQuery = `mutation($key: String, $text: String!) { createCategory(idempotencyKey: $key, input: {text: $text}) { id text } }`

// The rollout of keys to an existing createCategory: while its key is
// optional (@idempotent(keyRequired: false)), a call without a key runs as
// the mutation did before (a new category each time, nothing claimed,
// nothing stored), counted in idem.keyless and logged; a call with a key
// is retry-safe at once; once the key is required, a call without one is
// refused with IDEMPOTENCY_KEY_MISSING.
func TestRolloutOfKeys(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		reader := sdkmetric.NewManualReader()
		var logs safeBuffer
		a := newApp(t, b, idem.Config{
			MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
			Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
		})
		ctx := idemschema.AllTenants(context.Background())

		// Without a key: runs, twice, as before.
		for range 2 {
			r := a.GQL("acme", createCategoryQuery, map[string]any{"text": "legacy"})
			if len(r.Errors) > 0 || r.Outcome("createCategory") != idemcode.OutcomeKeyless {
				t.Fatalf("keyless call: %s", r.Body)
			}
		}
		rows := a.client.Category.Query().Where(category.Text("legacy")).AllX(idemschema.IncludeUnfinished(ctx))
		if len(rows) != 2 {
			t.Fatalf("%d categories after two keyless calls, want 2", len(rows))
		}
		for _, c := range rows {
			if c.IdempotencyKey != nil || c.IdempotencyStatus != nil || (c.IdempotencyResponse != nil && len(*c.IdempotencyResponse) > 0) || c.TenantID != "acme" {
				t.Fatalf("a keyless call stored idempotency state: %+v", c)
			}
		}
		if n := a.client.IdempotencyRecord.Query().CountX(ctx); n != 0 {
			t.Fatalf("%d idempotency records after keyless calls", n)
		}
		if got := keylessCount(t, reader); got != 2 {
			t.Fatalf("idem.keyless = %d, want 2", got)
		}
		if !strings.Contains(logs.String(), "without a key") {
			t.Fatalf("keyless calls not logged: %s", logs.String())
		}
		// A keyless call that fails leaves nothing behind.
		if r := a.GQL("acme", createCategoryQuery, map[string]any{"text": ""}); r.Code() != string(idemcode.BadUserInput) {
			t.Fatalf("keyless call with an invalid input: %s", r.Body)
		}
		if n := countCategories(t, a.client); n != 2 {
			t.Fatalf("%d categories after a failed keyless call, want 2", n)
		}

		// With a key: retry-safe.
		first := a.GQL("acme", createCategoryQuery, map[string]any{"key": "cat-1", "text": "keyed"})
		second := a.GQL("acme", createCategoryQuery, map[string]any{"key": "cat-1", "text": "keyed"})
		idemtest.RequireExecuted(t, first.Body, "createCategory")
		idemtest.RequireReplayed(t, second.Body, "createCategory")
		if !bytes.Equal(first.Data, second.Data) || countCategories(t, a.client) != 3 {
			t.Fatalf("keyed calls:\n%s\n%s", first.Body, second.Body)
		}
		if got := keylessCount(t, reader); got != 3 {
			t.Fatalf("idem.keyless = %d after keyed calls, want 3 (the keyless calls, the failed one included)", got)
		}

		// The key required: the directive without keyRequired: false.
		es := keyRequired(todoapp.Schema(a.client), "createCategory")
		required := serve(t, es, a.client, idem.Config{})
		if r := required.GQL("acme", createCategoryQuery, map[string]any{"text": "late"}); r.Code() != string(idemcode.KeyMissing) {
			t.Fatalf("keyless call once the key is required: %s", r.Body)
		}
		idemtest.RequireReplayed(t, required.GQL("acme", createCategoryQuery, map[string]any{"key": "cat-1", "text": "keyed"}).Body, "createCategory")
		if n := countCategories(t, a.client); n != 3 {
			t.Fatalf("%d categories, want 3", n)
		}
	})
}

// The edges of a keyless call's result are read in its transaction, on one
// connection, while gqlgen resolves sibling fields concurrently: the hook
// runs them one at a time, as it does in a call with a key.
func TestKeylessCallReadsItsEdgesInItsTransaction(t *testing.T) {
	testkit.Each(t, func(t *testing.T, b idemtest.Kind) {
		a := newApp(t, b, idem.Config{})
		var sel strings.Builder
		for i := range 30 {
			fmt.Fprintf(&sel, " t%d: todos { id category { id todos { id } } }", i)
		}
		q := `mutation($in: CreateCategoryInput!) { createCategory(input: $in) { id` + sel.String() + ` } }`
		for round := range 3 {
			td := a.createTodo("acme", fmt.Sprint("todo-", round), "read", nil)
			r := a.GQL("acme", q, map[string]any{"in": map[string]any{"text": fmt.Sprint("edges-", round), "todoIDs": []string{td}}})
			if len(r.Errors) > 0 || r.Outcome("createCategory") != idemcode.OutcomeKeyless || !strings.Contains(string(r.Data), `"t29":[{"id":"`+td+`"`) {
				t.Fatalf("round %d: %.500s", round, r.Body)
			}
		}
	})
}

// A generated create mutation whose key is required refuses a call
// without one before anything runs.
func TestGeneratedMutationRequiresItsKey(t *testing.T) {
	a := newApp(t, idemtest.SQLite, idem.Config{})
	r := a.GQL("acme", `mutation { createTodo(input: {text: "x"}) { id } }`, nil)
	if len(r.Errors) == 0 || !strings.Contains(r.Errors[0].Message, "idempotencyKey") || countTodos(t, a.client, "acme") != 0 {
		t.Fatalf("createTodo without a key: %s", r.Body)
	}
}

// keyRequired returns es with the @idempotent directive of field without
// keyRequired: false, as the schema is once the rollout is over.
func keyRequired(es graphql.ExecutableSchema, field string) graphql.ExecutableSchema {
	orig := es.Schema()
	s := *orig
	m := *orig.Mutation
	m.Fields = slices.Clone(m.Fields)
	for i, f := range m.Fields {
		if f.Name != field {
			continue
		}
		fc := *f
		d := *f.Directives.ForName(directive.Name)
		d.Arguments = slices.DeleteFunc(slices.Clone(d.Arguments), func(a *ast.Argument) bool { return a.Name == "keyRequired" })
		fc.Directives = ast.DirectiveList{&d}
		m.Fields[i] = &fc
	}
	s.Mutation = &m
	s.Types = maps.Clone(orig.Types)
	s.Types[m.Name] = &m
	return switchedSchema{ExecutableSchema: es, schema: &s}
}

type switchedSchema struct {
	graphql.ExecutableSchema
	schema *ast.Schema
}

func (s switchedSchema) Schema() *ast.Schema { return s.schema }

func keylessCount(t *testing.T, reader *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == idem.MetricKeyless {
				for _, dp := range sum.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// safeBuffer is a bytes.Buffer for a logger written from several
// goroutines.
type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
