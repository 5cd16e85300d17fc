package idemgen

import (
	"errors"
	"fmt"
	goast "go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/codegen"
	"github.com/99designs/gqlgen/codegen/config"
	"github.com/99designs/gqlgen/codegen/templates"
	"github.com/99designs/gqlgen/plugin"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/goovo/idem/internal/directive"
	"github.com/goovo/idem/internal/fingerprint"
)

// Plugin is the gqlgen side of the generator. Run gqlgen with it, in either
// position:
//
//	cfg, err := config.LoadConfigFromDefaultLocations()
//	err = api.Generate(cfg, api.PrependPlugin(idemgen.NewPlugin()))
//
// (api.AddPlugin works as well: the directive's enum is bound in the
// generated schema, not by the plugin.) It checks every @idempotent
// mutation against the ent package generated with the Extension (its key
// argument, its record entity, the arguments a claim takes fields from),
// leaves the directive to the runtime hook (no directive function to
// write), and writes the resolver of each generated create<T> mutation.
// gqlgen prefixes its errors with the plugin's name.
type Plugin struct{}

// NewPlugin returns the gqlgen plugin.
func NewPlugin() *Plugin { return &Plugin{} }

var (
	_ plugin.ConfigMutator       = (*Plugin)(nil)
	_ plugin.CodeGenerator       = (*Plugin)(nil)
	_ plugin.ResolverImplementer = (*Plugin)(nil)
)

// Name implements plugin.Plugin.
func (*Plugin) Name() string { return "idemgen" }

// MutateConfig implements plugin.ConfigMutator.
func (*Plugin) MutateConfig(cfg *config.Config) error {
	if cfg.Directives == nil {
		cfg.Directives = map[string]config.DirectiveConfig{}
	}
	// The hook reads the directive from the schema at run time.
	cfg.Directives[directive.Name] = config.DirectiveConfig{SkipRuntime: true}
	if !cfg.Models.Exists(ModeEnum) {
		cfg.Models.Add(ModeEnum, modeModel)
	}
	return CheckSchema(cfg.Schema)
}

// CheckSchema reports the first @idempotent field that cannot work: one
// outside Mutation, one without an idempotencyKey: String argument, one
// whose key is optional for a rollout (keyRequired: false) but whose
// argument is String!, one whose fingerprintExclude names a path that is
// not among its arguments, or one whose retentionSeconds is not positive.
func CheckSchema(s *ast.Schema) error {
	for _, def := range s.Types {
		for _, f := range def.Fields {
			d := f.Directives.ForName(directive.Name)
			if d == nil {
				continue
			}
			if s.Mutation == nil || def.Name != s.Mutation.Name {
				return fmt.Errorf("%s.%s: @%s applies to mutation fields only", def.Name, f.Name, directive.Name)
			}
			arg := f.Arguments.ForName(directive.KeyArgument)
			if arg == nil || arg.Type.Elem != nil || arg.Type.NamedType != "String" {
				return fmt.Errorf("%s.%s is @%s and needs the argument %s: String! (or String with the Idempotency-Key header, or keyRequired: false)",
					def.Name, f.Name, directive.Name, directive.KeyArgument)
			}
			if a := d.Arguments.ForName(directive.ArgKeyRequired); a != nil && a.Value != nil && a.Value.Raw == "false" && arg.Type.NonNull {
				return fmt.Errorf("%s.%s has @%s(%s: false) but its %s is String!, so no call can omit it: make it String",
					def.Name, f.Name, directive.Name, directive.ArgKeyRequired, directive.KeyArgument)
			}
			if err := fingerprint.CheckPaths(s, f, directive.FingerprintExclude(d)); err != nil {
				return fmt.Errorf("%s.%s: @%s(%s:) names a path that is not an argument of the mutation: %w",
					def.Name, f.Name, directive.Name, directive.ArgFingerprintExclude, err)
			}
			if a := d.Arguments.ForName(directive.ArgRetentionSeconds); a != nil && a.Value != nil {
				if n, err := strconv.Atoi(a.Value.Raw); err != nil || n <= 0 {
					return fmt.Errorf("%s.%s: @%s(%s:) must be a positive number of seconds, got %s",
						def.Name, f.Name, directive.Name, directive.ArgRetentionSeconds, a.Value.Raw)
				}
			}
		}
	}
	return nil
}

// GenerateCode implements plugin.CodeGenerator. It writes nothing: it
// checks, with the Go types gqlgen bound, that each @idempotent mutation
// names a record entity of the ent package and that every argument a claim
// takes a field from has that field's type, so that the hook never meets
// these mistakes at server start or at the first request. It also fails for
// a resolver the application kept that creates the row its claim inserts
// (each key would leave two rows), naming the file, the resolver and the
// fix; entgql's default create body is rewritten instead (Implement). And
// it fails for a resolver of an @idempotent mutation whose body opens a
// transaction of its own or writes through r.client, outside the claim's
// transaction.
func (*Plugin) GenerateCode(data *codegen.Data) error {
	if data.Schema.Mutation == nil {
		return nil
	}
	var mutation *codegen.Object
	for _, o := range data.Objects {
		if o.Name == data.Schema.Mutation.Name {
			mutation = o
		}
	}
	if mutation == nil {
		return nil
	}
	if err := checkKeptResolvers(data.Config, mutation); err != nil {
		return err
	}
	if err := checkOutsideWrites(data.Config, mutation); err != nil {
		return err
	}
	var pkg *types.Package
	for _, f := range mutation.Fields {
		d := f.FieldDefinition.Directives.ForName(directive.Name)
		if d == nil {
			continue
		}
		if pkg == nil {
			var err error
			if pkg, err = entPackage(data.Config); err != nil {
				return err
			}
		}
		if err := checkField(pkg, mutation.Name, f, d); err != nil {
			return err
		}
	}
	return nil
}

// entPackage finds the ent package generated with the Extension among
// gqlgen's autobind packages.
func entPackage(cfg *config.Config) (*types.Package, error) {
	for _, path := range cfg.AutoBind {
		p := cfg.Packages.Load(path)
		if p == nil || p.Types == nil {
			continue
		}
		client, ok := p.Types.Scope().Lookup("Client").(*types.TypeName)
		if !ok {
			continue
		}
		if m, _, _ := types.LookupFieldOrMethod(types.NewPointer(client.Type()), true, p.Types, "IdempotencyBackend"); m != nil {
			return p.Types, nil
		}
	}
	return nil, errors.New("no package in gqlgen's autobind list is an ent package generated with idemgen: " +
		"run ent's generation with idemgen.NewExtension() first, and autobind its package in gqlgen.yml (entgql.WithConfigPath does)")
}

// checkField checks one @idempotent mutation against the ent package.
func checkField(pkg *types.Package, object string, f *codegen.Field, d *ast.Directive) error {
	where := object + "." + f.Name
	entity, named := directive.DefaultRecordEntity, false
	if a := d.Arguments.ForName(directive.ArgRecord); a != nil && a.Value != nil && a.Value.Raw != "" {
		entity, named = a.Value.Raw, true
	}
	argsType, ok := pkg.Scope().Lookup("idem" + entity + "Args").(*types.TypeName)
	if !ok {
		switch _, isType := pkg.Scope().Lookup(entity).(*types.TypeName); {
		case !named:
			return fmt.Errorf("%s is @%s without %s:, so its records go to %s, which the ent package %s does not have. Add it to the ent schema,\n\n\ttype %s struct{ idemschema.Record }\n\nor name the entity that holds the records: @%s(%s: \"...\")",
				where, directive.Name, directive.ArgRecord, entity, pkg.Path(), entity, directive.Name, directive.ArgRecord)
		case isType:
			return fmt.Errorf("%s: its record entity %s has no idemschema.Mixin; add the mixin to its schema, or name another entity", where, entity)
		default:
			return fmt.Errorf("%s: its record entity %q is not an ent type of %s (names are the ent schemas', case included)", where, entity, pkg.Path())
		}
	}
	st, ok := argsType.Type().Underlying().(*types.Struct)
	if !ok {
		return nil
	}
	type target struct {
		field string
		typ   types.Type
	}
	byName := map[string]target{}
	for i := range st.NumFields() {
		tag := reflect.StructTag(st.Tag(i))
		for _, name := range strings.Split(tag.Get("idem"), ",") {
			byName[name] = target{field: tag.Get("ent"), typ: st.Field(i).Type()}
		}
	}
	set := map[string]string{}
	for _, a := range f.Args {
		t, ok := byName[a.Name]
		if !ok || a.TypeReference == nil {
			continue
		}
		if other, ok := set[t.field]; ok {
			return fmt.Errorf("%s: the arguments %s and %s both set %s.%s; keep one", where, other, a.Name, entity, t.field)
		}
		set[t.field] = a.Name
		if !assignable(a.TypeReference.GO, t.typ) {
			q := types.RelativeTo(pkg)
			return fmt.Errorf("%s: argument %s sets %s.%s, a %s, but gqlgen binds it to %s: declare it with a GraphQL type bound to %s, or rename it if it is not meant to set the field",
				where, a.Name, entity, t.field, types.TypeString(t.typ, q), types.TypeString(a.TypeReference.GO, q), types.TypeString(t.typ, q))
		}
	}
	return nil
}

// assignable reports whether the generated claim code takes an argument of
// Go type arg for a field of Go type field: the type itself, or a pointer
// to it (a nullable argument). Types are compared by their full names:
// gqlgen loads packages in several batches, so one type may have several
// type-checker objects.
func assignable(arg, field types.Type) bool {
	name := types.TypeString(field, nil)
	if types.TypeString(arg, nil) == name {
		return true
	}
	p, ok := arg.(*types.Pointer)
	return ok && types.TypeString(p.Elem(), nil) == name
}

// Implement implements plugin.ResolverImplementer. A new mutation that
// returns the entity holding its records (a generated create<T>, or a
// hand-written @idempotent(record: "<T>"): T) starts as
// "return ent.Claimed<T>(ctx)", to which the application may add its
// business logic; any other new resolver gets gqlgen's usual stub. A
// resolver that exists is kept as it is, except the body entgql's
// documentation writes for a create (return
// r.client.T.Create().SetInput(input).Save(ctx)), which the app had before
// the mutation became idempotent: it would insert a second row next to the
// claim's, so it becomes "return ent.Claimed<T>(ctx)" too. (Other bodies
// that create a T of their own fail GenerateCode.)
func (*Plugin) Implement(prev string, f *codegen.Field) string {
	if named, ok := createdEntity(f); ok && (prev == "" || defaultCreate(prev, named.Obj().Name())) {
		return createBody(named)
	}
	if prev != "" {
		return prev
	}
	return fmt.Sprintf("panic(fmt.Errorf(\"not implemented: %v - %v\"))", f.GoFieldName, f.Name)
}

// createBody returns the body of a resolver whose records are the T it
// returns: the claimed T. It runs while gqlgen renders the resolvers, whose
// imports name T's package.
func createBody(t *types.Named) string {
	pkg := templates.CurrentImports.Lookup(t.Obj().Pkg().Path())
	return fmt.Sprintf("return %s.Claimed%s(ctx)", pkg, t.Obj().Name())
}

// createdEntity returns the T of a mutation whose records are the T it
// returns.
func createdEntity(f *codegen.Field) (*types.Named, bool) {
	if f.FieldDefinition == nil || f.TypeReference == nil {
		return nil, false
	}
	d := f.FieldDefinition.Directives.ForName(directive.Name)
	if d == nil {
		return nil, false
	}
	rec := d.Arguments.ForName(directive.ArgRecord)
	if rec == nil || rec.Value == nil {
		return nil, false
	}
	named, ok := deref(f.TypeReference.GO).(*types.Named)
	if !ok || named.Obj().Name() != rec.Value.Raw || named.Obj().Pkg() == nil {
		return nil, false
	}
	return named, true
}

// defaultCreate reports whether body is entgql's create of entity from the
// input: return <client>.T.Create().SetInput(input).Save(ctx), through
// r.client or a client from the context.
func defaultCreate(body, entity string) bool {
	re := regexp.MustCompile(`^return[\w.()]*\.` + regexp.QuoteMeta(entity) + `\.Create\(\)\.SetInput\(input\)\.Save\(ctx\)$`)
	return re.MatchString(noSpace(body))
}

// createsOwnRow reports whether body creates a T without using the claimed
// one: it calls <client>.T.Create() and never Claimed<T>.
func createsOwnRow(body, entity string) bool {
	b := noSpace(body)
	return strings.Contains(b, "."+entity+".Create()") && !strings.Contains(b, "Claimed"+entity+"(")
}

func noSpace(s string) string {
	return strings.Join(strings.Fields(s), "")
}

// checkKeptResolvers fails generation for a resolver the application kept
// (it existed before the mutation became idempotent) that creates the row
// the claim inserts: each key would leave two rows. entgql's default body
// is rewritten by Implement instead.
func checkKeptResolvers(cfg *config.Config, mutation *codegen.Object) error {
	if !cfg.Resolver.IsDefined() {
		return nil
	}
	receiver := templates.LcFirst(mutation.Name) + templates.UcFirst(cfg.Resolver.Type)
	var bodies map[string]keptBody
	for _, f := range mutation.Fields {
		named, ok := createdEntity(f)
		if !ok {
			continue
		}
		entity := named.Obj().Name()
		if bodies == nil {
			var err error
			if bodies, err = resolverBodies(cfg.Resolver.Dir(), receiver); err != nil {
				return err
			}
		}
		kept, ok := bodies[f.GoFieldName]
		if !ok || defaultCreate(kept.body, entity) || !createsOwnRow(kept.body, entity) {
			continue
		}
		pkg := named.Obj().Pkg().Name()
		file := kept.file
		if wd, err := os.Getwd(); err == nil {
			if rel, err := filepath.Rel(wd, file); err == nil {
				file = rel
			}
		}
		return fmt.Errorf("%s: %s.%s creates a %s of its own, but %s's claim already inserts that row from the arguments, so each key would leave two rows. Start the resolver from the claimed row instead:\n\n\trow, err := %s.Claimed%s(ctx)\n\n(and change row as needed, through ent.FromContext(ctx) or row.Update())",
			file, receiver, f.GoFieldName, entity, f.Name, pkg, entity)
	}
	return nil
}

// ownTx and clientWrite find, in a resolver's body, a
// transaction of its own or a write through the resolver's client, which
// commit whether or not the mutation does.
var (
	ownTx       = regexp.MustCompile(`\br\s*\.\s*(client|Client)\s*\.\s*(Tx|BeginTx)\s*\(`)
	clientWrite = regexp.MustCompile(`\br\s*\.\s*(client|Client)\s*\.\s*\w+\s*\.\s*(Create|CreateBulk|MapCreateBulk|Update|UpdateOne|UpdateOneID|Delete|DeleteOne|DeleteOneID)\s*\(`)
)

// writesOutsideClaim describes what body does outside the claim's
// transaction, "" when nothing the generator can see. A body that says it
// means it (idem.CommitsAlone) is left alone.
func writesOutsideClaim(body string) string {
	switch {
	case strings.Contains(noSpace(body), "CommitsAlone("):
		return ""
	case ownTx.MatchString(body):
		return "opens a transaction of its own (" + noSpace(ownTx.FindString(body)) + "ctx))"
	case clientWrite.MatchString(body):
		return "writes through the server's client (" + noSpace(clientWrite.FindString(body)) + "…))"
	}
	return ""
}

// checkOutsideWrites fails generation for a resolver of an @idempotent
// mutation that writes outside the claim's transaction where the code
// shows it: through r.client, or in a transaction of its own. Those writes
// would commit whether or not the mutation does (the hook refuses them at
// run time too, idem.ErrWriteOutsideClaim). entgql's default create body
// is rewritten by Implement instead.
func checkOutsideWrites(cfg *config.Config, mutation *codegen.Object) error {
	if !cfg.Resolver.IsDefined() {
		return nil
	}
	receiver := templates.LcFirst(mutation.Name) + templates.UcFirst(cfg.Resolver.Type)
	var bodies map[string]keptBody
	for _, f := range mutation.Fields {
		if f.FieldDefinition == nil || f.FieldDefinition.Directives.ForName(directive.Name) == nil {
			continue
		}
		if bodies == nil {
			var err error
			if bodies, err = resolverBodies(cfg.Resolver.Dir(), receiver); err != nil {
				return err
			}
		}
		kept, ok := bodies[f.GoFieldName]
		if !ok {
			continue
		}
		if named, created := createdEntity(f); created && defaultCreate(kept.body, named.Obj().Name()) {
			continue
		}
		what := writesOutsideClaim(kept.body)
		if what == "" {
			continue
		}
		file := kept.file
		if wd, err := os.Getwd(); err == nil {
			if rel, err := filepath.Rel(wd, file); err == nil {
				file = rel
			}
		}
		return fmt.Errorf("%s: %s.%s %s, but %s is @idempotent: those writes would commit whether or not the mutation does, and a retry after a crash would make them again (the hook refuses them at run time). Write through ent.FromContext(ctx), the mutation's transaction; for a write that must commit on its own (and may be made again), pass idem.CommitsAlone(ctx)",
			file, receiver, f.GoFieldName, what, f.Name)
	}
	return nil
}

type keptBody struct{ file, body string }

// resolverBodies reads the bodies of receiver's methods in the resolver
// package's directory, by method name.
func resolverBodies(dir, receiver string) (map[string]keptBody, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]keptBody{}
	fset := token.NewFileSet()
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		file, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			continue // gqlgen reports it
		}
		for _, d := range file.Decls {
			fn, ok := d.(*goast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 || fn.Body == nil {
				continue
			}
			t := fn.Recv.List[0].Type
			if star, ok := t.(*goast.StarExpr); ok {
				t = star.X
			}
			if id, ok := t.(*goast.Ident); !ok || id.Name != receiver {
				continue
			}
			body := src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset]
			out[fn.Name.Name] = keptBody{file: path, body: string(body)}
		}
	}
	return out, nil
}

func deref(t types.Type) types.Type {
	if p, ok := t.(*types.Pointer); ok {
		return p.Elem()
	}
	return t
}
