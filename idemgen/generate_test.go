package idemgen_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
	"github.com/99designs/gqlgen/api"
	"github.com/99designs/gqlgen/codegen/config"

	"github.com/goovo/idem/idemgen"
)

// The generation tests run the generator as go generate does, ent's step
// and then gqlgen's, in a new module in a temporary directory built from
// testdata/gen, which requires this module by a replace directive.

const gqlgenYML = `schema:
  - graph/*.graphql
exec:
  filename: graph/generated.go
  package: graph
# gqlgen's default: a file for the models the schema declares without a Go
# type. idemgen's enum must not land there.
model:
  filename: graph/models_gen.go
  package: graph
resolver:
  layout: follow-schema
  dir: graph
  package: graph
autobind:
  - example.com/gentest/ent
models:
  ID:
    model:
      - github.com/99designs/gqlgen/graphql.UUID
skip_mod_tidy: true
`

// newModule makes the module and runs ent's step in it, the working
// directory of the test from then on.
func newModule(t *testing.T) string { return newModuleWith(t, "") }

// newModuleWith is newModule with graph/handwritten.graphql written before
// ent's step, as in an application's first generation.
func newModuleWith(t *testing.T, handwritten string) string {
	return newModuleLaid(t, handwritten, false)
}

// newModuleLaid is newModuleWith, and with inEnt ent's step runs in ent/
// with paths relative to it, as in entgql's tutorial (ent/entc.go run by
// ent/generate.go).
func newModuleLaid(t *testing.T, handwritten string, inEnt bool) string {
	t.Helper()
	return newModuleFrom(t, map[string]string{"graph/handwritten.graphql": handwritten}, inEnt, false)
}

// newModuleFrom is newModuleLaid with the files of graph/ that the app has
// before its first generation (by path; empty ones are not written), and
// with relay, entgql's Relay types (Cursor, Node, …).
func newModuleFrom(t *testing.T, before map[string]string, inEnt, relay bool) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile("testdata/gen/schema/schema.go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := strings.Replace(string(mod), "module github.com/goovo/idem", "module example.com/gentest", 1) +
		"\nrequire github.com/goovo/idem v0.0.0\n\nreplace github.com/goovo/idem => " + root + "\n"
	for name, content := range map[string]string{
		"go.mod":               gomod,
		"go.sum":               string(sum),
		"gqlgen.yml":           gqlgenYML,
		"ent/schema/schema.go": string(schema),
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "graph"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range before {
		if content == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	up, schemaDir := "", "./ent/schema"
	if inEnt {
		t.Chdir(filepath.Join(dir, "ent"))
		up, schemaDir = "../", "./schema"
	} else {
		t.Chdir(dir)
	}
	ix, err := idemgen.NewExtension()
	if err != nil {
		t.Fatal(err)
	}
	gx, err := entgql.NewExtension(entgql.WithSchemaGenerator(), entgql.WithSchemaPath(up+"graph/ent.graphql"),
		entgql.WithConfigPath(up+"gqlgen.yml"), entgql.WithRelaySpec(relay), ix.EntGQLOption())
	if err != nil {
		t.Fatal(err)
	}
	if err := entc.Generate(schemaDir, &gen.Config{}, entc.Extensions(gx, ix)); err != nil {
		t.Fatalf("ent's step: %v", err)
	}
	t.Chdir(dir)
	return dir
}

// runGQLGen runs gqlgen's step with idemgen's plugin added after gqlgen's
// own, on ent's schema and schema, a hand-written one.
func runGQLGen(t *testing.T, dir, schema string) error {
	t.Helper()
	return runGQLGenWith(t, dir, schema, nil)
}

// runGQLGenWith is runGQLGen with the application's Go files in graph/
// (by name) written first, as an app has them before it adopts idemgen.
func runGQLGenWith(t *testing.T, dir, schema string, goFiles map[string]string) error {
	t.Helper()
	for _, pattern := range []string{"graph/*.go", "graph/handwritten.graphql"} {
		files, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, f := range files {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "graph/handwritten.graphql"), []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, src := range goFiles {
		if err := os.WriteFile(filepath.Join(dir, "graph", name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.LoadConfig(filepath.Join(dir, "gqlgen.yml"))
	if err != nil {
		t.Fatal(err)
	}
	return api.Generate(cfg, api.AddPlugin(idemgen.NewPlugin()))
}

// Every mistake in how a mutation opts in, which the hook would otherwise
// meet at server start or at the first request, fails gqlgen's step with
// one message that names the fix; a correct schema generates code that
// compiles, with no models file of gqlgen's for idemgen's enum.
func TestGeneration(t *testing.T) {
	dir := newModule(t)
	for _, c := range []struct {
		name, schema, err string
	}{
		{"no key argument",
			`extend type Mutation { pay(amount: Int): Int @idempotent }`,
			"Mutation.pay is @idempotent and needs the argument idempotencyKey: String!"},
		{"optional key required by the schema",
			`extend type Mutation { pay(idempotencyKey: String!): Int @idempotent(keyRequired: false) }`,
			"Mutation.pay has @idempotent(keyRequired: false) but its idempotencyKey is String!, so no call can omit it: make it String"},
		{"no IdempotencyRecord entity",
			`extend type Mutation { approve(idempotencyKey: String!, id: ID!): Boolean @idempotent }`,
			"Mutation.approve is @idempotent without record:, so its records go to IdempotencyRecord, which the ent package example.com/gentest/ent does not have. Add it to the ent schema,\n\n\ttype IdempotencyRecord struct{ idemschema.Record }"},
		{"record entity without the mixin",
			`extend type Mutation { approve(idempotencyKey: String!): Boolean @idempotent(record: "Widget") }`,
			"Mutation.approve: its record entity Widget has no idemschema.Mixin; add the mixin to its schema, or name another entity"},
		{"record entity unknown to ent",
			`extend type Mutation { approve(idempotencyKey: String!): Boolean @idempotent(record: "todo") }`,
			`Mutation.approve: its record entity "todo" is not an ent type of example.com/gentest/ent`},
		{"argument of another type",
			`extend type Mutation { quick(idempotencyKey: String!, text: String!, priorityOrder: String): Todo! @idempotent(record: "Todo") }`,
			"Mutation.quick: argument priorityOrder sets Todo.priority, a int, but gqlgen binds it to *string"},
		{"two arguments for one field",
			`extend type Mutation { quick(idempotencyKey: String!, text: String!, priority: Int, priorityOrder: Int): Todo! @idempotent(record: "Todo") }`,
			"Mutation.quick: the arguments priority and priorityOrder both set Todo.priority; keep one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := runGQLGen(t, dir, c.schema)
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, c.err)
			}
			if !strings.HasPrefix(err.Error(), "idemgen: ") || strings.Count(err.Error(), "idemgen:") != 1 {
				t.Fatalf("error %q: want one idemgen: prefix", err)
			}
		})
	}
	t.Run("correct", func(t *testing.T) {
		// A hand-written mutation whose records are Todo rows, and whose
		// key is optional during a rollout; createdAt is skipped on create,
		// so no type is asked of it.
		err := runGQLGen(t, dir, `extend type Mutation {
			quick(idempotencyKey: String, text: String!, priorityOrder: Int, ownerID: ID, createdAt: String): Todo!
				@idempotent(record: "Todo", keyRequired: false)
		}`)
		if err != nil {
			t.Fatal(err) // gqlgen compiled the generated packages
		}
		if _, err := os.Stat(filepath.Join(dir, "graph/models_gen.go")); !os.IsNotExist(err) {
			t.Errorf("gqlgen wrote a models file: %v", err)
		}
		resolvers, err := os.ReadFile(filepath.Join(dir, "graph/handwritten.resolvers.go"))
		if err != nil || !strings.Contains(string(resolvers), "return ent.ClaimedTodo(ctx)") {
			t.Errorf("resolver of quick: %s (%v)", resolvers, err)
		}
	})
}

// The first generation of an application that declares the scalars entgql
// declares (entgql's tutorial declares scalar Time) and uses @idempotent in
// its own schema succeeds: entgql cannot load that schema before the
// directive exists, and would declare Time a second time.
//
// The same holds in entgql's tutorial's layout, where ent's step runs in
// ent/ and finds gqlgen.yml above it.
func TestFirstGenerationWithAppScalars(t *testing.T) {
	const schema = `scalar Time
extend type Mutation {
	quick(idempotencyKey: String!, text: String!, at: Time): Todo! @idempotent(record: "Todo")
}`
	for _, inEnt := range []bool{false, true} {
		t.Run(map[bool]string{false: "from the module's root", true: "from ent/"}[inEnt], func(t *testing.T) {
			dir := newModuleLaid(t, schema, inEnt)
			ent, err := os.ReadFile(filepath.Join(dir, "graph/ent.graphql"))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(ent), "scalar Time") || !strings.Contains(string(ent), "createdAt: Time!") {
				t.Fatalf("ent.graphql declares Time again, or no longer uses it:\n%s", ent)
			}
			if err := runGQLGen(t, dir, schema); err != nil {
				t.Fatalf("first gqlgen step: %v", err)
			}
		})
	}
}

// An app that had its own createTodo before it adopted idemgen keeps its
// resolver through gqlgen's step: entgql's default create body, which
// would insert a second row next to the claim's, becomes the claimed row;
// another body that creates a Todo of its own fails the step with a message
// naming the file, the resolver and the fix.
func TestGenerationKeptCreateResolver(t *testing.T) {
	dir := newModule(t)
	const resolver = `package graph

import "example.com/gentest/ent"

type Resolver struct{ client *ent.Client }
`
	old := func(body string) string {
		return `package graph

import (
	"context"

	"example.com/gentest/ent"
)

func (r *mutationResolver) CreateTodo(ctx context.Context, input ent.CreateTodoInput) (*ent.Todo, error) {
	` + body + `
}
`
	}
	t.Run("entgql's default body", func(t *testing.T) {
		err := runGQLGenWith(t, dir, "scalar Unused", map[string]string{
			"resolver.go":      resolver,
			"ent.resolvers.go": old("return r.client.Todo.Create().SetInput(input).Save(ctx)"),
		})
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "graph/ent.resolvers.go"))
		if err != nil || !strings.Contains(string(b), "return ent.ClaimedTodo(ctx)") || strings.Contains(string(b), "Create()") {
			t.Fatalf("kept resolver not rewritten: %s (%v)", b, err)
		}
	})
	t.Run("another body", func(t *testing.T) {
		err := runGQLGenWith(t, dir, "scalar Unused", map[string]string{
			"resolver.go":      resolver,
			"ent.resolvers.go": old("t, err := r.client.Todo.Create().SetInput(input).SetPriority(1).Save(ctx)\n\treturn t, err"),
		})
		want := "idemgen: graph/ent.resolvers.go: mutationResolver.CreateTodo creates a Todo of its own, but createTodo's claim already inserts that row from the arguments, so each key would leave two rows. Start the resolver from the claimed row instead:\n\n\trow, err := ent.ClaimedTodo(ctx)"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error:\n%v\nwant it to contain:\n%s", err, want)
		}
	})
}

// A schema package with record entities and no archive fails ent's step
// with one message naming the fix, unless idemgen.WithoutArchive says so;
// a storage other than SQL fails it too.
func TestGenerationWithoutArchive(t *testing.T) {
	ix, err := idemgen.NewExtension()
	if err != nil {
		t.Fatal(err)
	}
	cfg := &gen.Config{Target: t.TempDir(), Package: "example.com/noarchive/ent"}
	err = entc.Generate("./testdata/noarchive", cfg, entc.Extensions(ix))
	if err == nil || !strings.Contains(err.Error(), "no idemschema.Archive entity") ||
		!strings.Contains(err.Error(), "type IdempotencyArchive struct{ idemschema.Archive }") ||
		!strings.Contains(err.Error(), "idemgen.WithoutArchive()") || strings.Count(err.Error(), "idemgen:") != 1 {
		t.Fatalf("error: %v", err)
	}
	ix, _ = idemgen.NewExtension(idemgen.WithoutArchive())
	cfg = &gen.Config{Target: cfg.Target, Package: cfg.Package}
	if err := entc.Generate("./testdata/noarchive", cfg, entc.Extensions(ix)); err != nil {
		t.Fatalf("WithoutArchive: %v", err)
	}
	backend, err := os.ReadFile(filepath.Join(cfg.Target, "idem_backend.go"))
	if err != nil || !strings.Contains(string(backend), `return "" // no idemschema.Archive entity`) ||
		!strings.HasPrefix(string(backend), "// Code generated by ent, DO NOT EDIT.") {
		t.Fatalf("idem_backend.go: %s (%v)", backend, err)
	}

	cfg = &gen.Config{Target: t.TempDir(), Package: cfg.Package}
	err = entc.Generate("./testdata/noarchive", cfg, entc.Storage("gremlin"), entc.Extensions(ix))
	if err == nil || err.Error() != "idemgen: the idempotency records need ent's SQL storage" {
		t.Fatalf("gremlin storage: %v", err)
	}
}

// entgqlsTutorialSchema stands for the graph/ent.graphql that entgql alone
// wrote before the app added idem (entgql's tutorial): entgql's directives
// and the scalars it declares, Cursor among them.
const entgqlsTutorialSchema = `directive @goModel(model: String, models: [String!], forceGenerate: Boolean) on OBJECT | INPUT_OBJECT | SCALAR | ENUM | INTERFACE | UNION
"""
Define a Relay Cursor type:
https://relay.dev/graphql/connections.htm#sec-Cursor
"""
scalar Cursor
"""The builtin Time type"""
scalar Time
`

// The first generation of an app in entgql's tutorial's shape, where
// entgql already wrote graph/ent.graphql (declaring scalar Time and scalar
// Cursor) and the app's own schema declares scalar Time, succeeds: the old
// ent.graphql is entgql's, which this generation replaces, not the app's.
// Before, its scalars were dropped from the new ent.graphql as if the app
// declared them, and gqlgen failed with "Undefined type Cursor".
func TestFirstGenerationOverEntgqlsTutorialSchema(t *testing.T) {
	const schema = "scalar Time\n"
	dir := newModuleFrom(t, map[string]string{
		"graph/ent.graphql":         entgqlsTutorialSchema,
		"graph/handwritten.graphql": schema,
	}, false, true)
	ent, err := os.ReadFile(filepath.Join(dir, "graph/ent.graphql"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ent), "scalar Cursor") || strings.Contains(string(ent), "scalar Time") {
		t.Errorf("ent.graphql must declare Cursor (no other file does) and not Time (the app's does):\n%s", ent)
	}
	cfg, err := config.LoadConfig(filepath.Join(dir, "gqlgen.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "graph/handwritten.graphql"), []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := idemgen.Generate(cfg); err != nil {
		t.Fatalf("first gqlgen step: %v", err)
	}
}

// A gqlgen step that fails leaves the generated files as they were:
// gqlgen's api.Generate alone deletes generated.go and models_gen.go
// before it reads the schema, and the app's next command then fails far
// from the cause.
func TestFailedGenerationLeavesTheFiles(t *testing.T) {
	dir := newModule(t)
	if err := runGQLGen(t, dir, "type Note { text: String! }\nextend type Query { notes: [Note!]! }"); err != nil {
		t.Fatal(err)
	}
	before := graphFiles(t, dir)
	for _, name := range []string{"generated.go", "models_gen.go"} {
		if _, ok := before[name]; !ok {
			t.Fatalf("the first generation wrote no graph/%s: %v", name, before)
		}
	}
	// A schema gqlgen refuses, and a resolver idemgen refuses.
	for _, schema := range []string{
		"extend type Query { notes: [Missing!]! }",
		`extend type Mutation { pay(amount: Int): Int @idempotent }`,
	} {
		if err := os.WriteFile(filepath.Join(dir, "graph/handwritten.graphql"), []byte(schema), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.LoadConfig(filepath.Join(dir, "gqlgen.yml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := idemgen.Generate(cfg); err == nil {
			t.Fatalf("%s: generation succeeded", schema)
		} else {
			t.Logf("%s: %v", schema, err)
		}
		after := graphFiles(t, dir)
		for name, b := range before {
			if after[name] != b {
				t.Errorf("%s: graph/%s changed or removed by the failed generation", schema, name)
			}
		}
		for name := range after {
			if _, ok := before[name]; !ok {
				t.Errorf("%s: graph/%s left by the failed generation", schema, name)
			}
		}
	}
}

// graphFiles reads the Go files of dir/graph.
func graphFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "graph/*.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m[filepath.Base(f)] = string(b)
	}
	return m
}
