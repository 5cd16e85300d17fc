package idemgen

import (
	"fmt"
	"strings"
	"testing"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/internal/directive"
)

func TestRecordsOfAGraph(t *testing.T) {
	g, err := entc.LoadGraph("../internal/testkit/testapp/ent/schema", &gen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := records(g)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Record{}
	for _, r := range recs {
		byName[r.Type.Name] = r
	}
	if len(byName) != 2 || byName["Shipment"] == nil || byName["IdempotencyRecord"] == nil {
		t.Fatalf("records %v, want Shipment and IdempotencyRecord", byName)
	}
	r := byName["Shipment"]
	if r.Scope.Name != "org" || r.Status.Name != "idempotency_status" ||
		!r.Create || r.LeaseSeconds != 10 || r.CreateInput() != "CreateShipmentInput" {
		t.Fatalf("record %+v", r)
	}
	var args []string
	for _, a := range r.Args {
		args = append(args, a.Name+"="+strings.Join(a.Names, "|"))
	}
	// label is skipped on create by entgql, so no argument sets it.
	if strings.Join(args, ",") != "destination=destination,weight_grams=weightGrams,created_at=createdAt" {
		t.Fatalf("fields filled from arguments: %v", args)
	}
	if g := byName["IdempotencyRecord"]; g.Create || g.Scope.Name != "tenant_id" || len(g.Args) != 0 || !g.RecordOnly() {
		t.Fatalf("general record %+v", g)
	}
}

// What a claim of the todo application's entities takes from arguments:
// the names of entgql's create input and entgql.MapsTo's, never a field
// entgql skips on create (created_at, blob); and which links isolation
// checks.
func TestRecordsOfTheTodoSchema(t *testing.T) {
	g, err := entc.LoadGraph("./internal/todoapp/ent/schema", &gen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := records(g)
	if err != nil {
		t.Fatal(err)
	}
	// As the extension's hook does before generating.
	for _, r := range recs {
		if err := prepareInputs(r.Type, r); err != nil {
			t.Fatal(err)
		}
	}
	if recs, err = records(g); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range recs {
		var args, edges []string
		for _, a := range r.Args {
			args = append(args, a.Name+"="+strings.Join(a.Names, "|")+":"+a.Setter)
		}
		for _, e := range r.IsolatedEdges {
			edges = append(edges, e.Edge.Name+">"+e.Target.Type.Name)
		}
		got[r.Type.Name] = fmt.Sprintf("create=%v input=%v isolate=%v recordOnly=%v args=%s edges=%s",
			r.Create, r.Input, r.Isolate, r.RecordOnly(), strings.Join(args, ","), strings.Join(edges, ","))
	}
	for name, want := range map[string]string{
		"Todo": "create=true input=true isolate=true recordOnly=false " +
			"args=status=status:SetStatus,priority=priority|priorityOrder:SetPriority,text=text:SetText,labels=labels:SetLabels," +
			"category_id=categoryID:SetCategoryID,parent=parentID:SetParentID,children=childIDs:AddChildIDs " +
			"edges=parent>Todo,children>Todo,category>Category",
		"Category": "create=false input=true isolate=true recordOnly=false " +
			"args=text=text:SetText,color=color:SetColor,todos=todoIDs:AddTodoIDs edges=todos>Todo",
		"IdempotencyRecord": "create=false input=false isolate=false recordOnly=true args= edges=",
	} {
		if got[name] != want {
			t.Errorf("%s:\n got %s\nwant %s", name, got[name], want)
		}
	}
	if len(got) != 3 {
		t.Errorf("records %v", got)
	}
}

func TestRecordsRejectsABadScope(t *testing.T) {
	// A scope field that does not exist: ent itself rejects the unique
	// index on it, naming the field.
	if _, err := entc.LoadGraph("./testdata/badscope", &gen.Config{}); err == nil || !strings.Contains(err.Error(), `"org"`) {
		t.Errorf("missing scope field: %v", err)
	}
	g, err := entc.LoadGraph("./testdata/optionalscope", &gen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := records(g); err == nil || !strings.Contains(err.Error(), "must be a required string field") {
		t.Errorf("optional scope field: %v", err)
	}
}

func TestCheckSchema(t *testing.T) {
	const directive = `directive @idempotent(record: String, fingerprintExclude: [String!], retentionSeconds: Int) on FIELD_DEFINITION
type Query { x: Int }
input Booking { clientTime: String amount: Int lines: [Line!] }
input Line { sku: String addedAt: String }
`
	for name, c := range map[string]struct {
		schema string
		err    string
	}{
		"key argument":      {`type Mutation { pay(idempotencyKey: String!): Int @idempotent }`, ""},
		"optional key":      {`type Mutation { pay(idempotencyKey: String): Int @idempotent }`, ""},
		"no key argument":   {`type Mutation { pay(amount: Int): Int @idempotent }`, "needs the argument idempotencyKey"},
		"key of wrong type": {`type Mutation { pay(idempotencyKey: Int!): Int @idempotent }`, "needs the argument idempotencyKey"},
		"list key":          {`type Mutation { pay(idempotencyKey: [String!]): Int @idempotent }`, "needs the argument idempotencyKey"},
		"not a mutation":    {`type Mutation { pay: Int } extend type Query { y(idempotencyKey: String!): Int @idempotent }`, "mutation fields only"},
		"excluded paths": {`type Mutation { book(idempotencyKey: String!, input: Booking!, token: String): Int
			@idempotent(fingerprintExclude: ["input.clientTime", "input.lines.addedAt", "token"]) }`, ""},
		"one excluded path": {`type Mutation { book(idempotencyKey: String!, input: Booking!): Int @idempotent(fingerprintExclude: "input.clientTime") }`, ""},
		"excluded path that is not there": {`type Mutation { book(idempotencyKey: String!, input: Booking!): Int @idempotent(fingerprintExclude: ["input.clientTme"]) }`,
			`Mutation.book: @idempotent(fingerprintExclude:) names a path that is not an argument of the mutation: "input.clientTme": input (Booking) has no field clientTme`},
		"excluded argument that is not there": {`type Mutation { book(idempotencyKey: String!, input: Booking!): Int @idempotent(fingerprintExclude: ["clientTime"]) }`,
			`"clientTime": book has no argument clientTime`},
		"retention":      {`type Mutation { pay(idempotencyKey: String!): Int @idempotent(retentionSeconds: 3600) }`, ""},
		"zero retention": {`type Mutation { pay(idempotencyKey: String!): Int @idempotent(retentionSeconds: 0) }`, "must be a positive number of seconds"},
	} {
		s, gerr := gqlparser.LoadSchema(&ast.Source{Input: directive + c.schema})
		if gerr != nil {
			t.Fatalf("%s: %v", name, gerr)
		}
		err := CheckSchema(s)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", name, err, c.err)
		}
	}
}

// idemschema.NoRecover opts a generated create out of the recoverer: its
// directive says recover: false, which the hook reads; without it the
// directive says nothing (the default, recover: true).
func TestCreateFieldOptsOutOfRecovery(t *testing.T) {
	g, err := entc.LoadGraph("../internal/testkit/testapp/ent/schema", &gen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := records(g)
	if err != nil {
		t.Fatal(err)
	}
	var r *Record
	for _, rec := range recs {
		if rec.Type.Name == "Shipment" {
			r = rec
		}
	}
	e := &Extension{}
	if a := e.createField(r).Directives.ForName("idempotent").Arguments.ForName("recover"); a != nil {
		t.Fatalf("recover: %s without NoRecover", a.Value.Raw)
	}
	r.NoRecover = true
	if a := e.createField(r).Directives.ForName("idempotent").Arguments.ForName("recover"); a == nil || a.Value.Raw != "false" {
		t.Fatalf("recover: %v with NoRecover", a)
	}
}

// idemschema.FingerprintExclude puts its paths into the generated create's
// directive, and generation fails, naming the entity, the mutation and the
// path, when a path is not a field of the entity's create input.
func TestCreateFieldExcludesPaths(t *testing.T) {
	for _, c := range []struct {
		paths []string
		err   string
	}{
		{[]string{"input.createdAt"}, ""},
		{[]string{"input.clientTime"}, `Shipment: idemschema.FingerprintExclude names a path that is not an argument of createShipment: "input.clientTime": input (CreateShipmentInput) has no field clientTime`},
	} {
		g, err := entc.LoadGraph("../internal/testkit/testapp/ent/schema", &gen.Config{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range g.Nodes {
			if n.Name == "Shipment" {
				var ant idemschema.Annotation
				if err := ant.Decode(n.Annotations[ant.Name()]); err != nil {
					t.Fatal(err)
				}
				n.Annotations[ant.Name()] = ant.Merge(idemschema.FingerprintExclude(c.paths...))
			}
		}
		input := &ast.Definition{Kind: ast.InputObject, Name: "CreateShipmentInput", Fields: ast.FieldList{
			{Name: "destination", Type: ast.NonNullNamedType("String", nil)},
			{Name: "createdAt", Type: ast.NamedType("Time", nil)},
		}}
		s := &ast.Schema{Types: map[string]*ast.Definition{input.Name: input}}
		err = (&Extension{}).schemaHook(g, s)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want %q", c.paths, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", c.paths, err)
		}
		d := s.Mutation.Fields.ForName("createShipment").Directives.ForName(directive.Name)
		if got := directive.FingerprintExclude(d); fmt.Sprint(got) != fmt.Sprint(c.paths) {
			t.Errorf("directive's fingerprintExclude %v, want %v", got, c.paths)
		}
	}
}

// A resolver body that writes outside the claim's transaction where the
// code shows it (a transaction of its own, a write through r.client) is
// found, and named; reads, the attempt's client, and a write that says it
// commits on its own are not.
func TestWritesOutsideClaim(t *testing.T) {
	for body, want := range map[string]string{
		"tx, err := r.Client.Tx(ctx)\nif err != nil { return nil, err }\ndefer tx.Rollback()": "opens a transaction of its own (r.Client.Tx(ctx))",
		"return r.client.Transfer.Create().SetAmount(a).Save(ctx)":                            "writes through the server's client (r.client.Transfer.Create(…))",
		"n, err := r.client.Account.Update().Where(account.ID(id)).AddBalance(-a).Save(ctx)":  "writes through the server's client (r.client.Account.Update(…))",
		"return r.client.Account.Query().Where(account.ID(id)).Only(ctx)":                     "",
		"return ent.FromContext(ctx).Transfer.Create().SetAmount(a).Save(ctx)":                "",
		"r.client.Audit.Create().SetWhat(w).Save(idem.CommitsAlone(ctx))":                     "",
	} {
		if got := writesOutsideClaim(body); got != want {
			t.Errorf("%q: %q, want %q", body, got, want)
		}
	}
}
