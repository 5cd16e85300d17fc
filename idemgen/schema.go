package idemgen

import (
	"os"
	"path/filepath"
	"strconv"

	"entgo.io/ent/entc/gen"
	"github.com/99designs/gqlgen/codegen/config"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/goovo/idem/internal/directive"
	"github.com/goovo/idem/internal/fingerprint"
)

// ModeEnum is the GraphQL enum of the directive's mode argument.
const ModeEnum = directive.ModeEnum

// modeModel is the Go type the generated schema binds ModeEnum to.
const modeModel = "github.com/goovo/idem.Mode"

// schemaHook adds the @idempotent directive, its mode enum and one create
// mutation per record entity to entgql's schema.
func (e *Extension) schemaHook(g *gen.Graph, s *ast.Schema) error {
	recs, err := records(g)
	if err != nil {
		return err
	}
	if s.Directives == nil {
		s.Directives = map[string]*ast.DirectiveDefinition{}
	}
	s.Directives[directive.Name] = directiveDefinition()
	s.AddTypes(modeEnum())
	if err := dropAppScalars(s); err != nil {
		return err
	}

	var fields ast.FieldList
	for _, r := range recs {
		if !r.Create {
			continue
		}
		if s.Types[r.CreateInput()] == nil {
			return errorf("%s: entgql did not generate %s; is entgql's mutation input generation on?", r.Type.Name, r.CreateInput())
		}
		f := e.createField(r)
		if err := fingerprint.CheckPaths(s, f, r.FingerprintExclude); err != nil {
			return errorf("%s: idemschema.FingerprintExclude names a path that is not an argument of %s: %v", r.Type.Name, f.Name, err)
		}
		fields = append(fields, f)
	}
	if len(fields) == 0 {
		return nil
	}
	mutation := s.Types["Mutation"]
	if mutation == nil {
		mutation = &ast.Definition{Kind: ast.Object, Name: "Mutation"}
		s.AddTypes(mutation)
	}
	mutation.Fields = append(mutation.Fields, fields...)
	s.Mutation = mutation
	return nil
}

// dropAppScalars removes from entgql's schema the scalars (Time, Cursor,
// Map, …) that the application's own schema files declare too, since gqlgen
// loads both and refuses a type declared twice. entgql leaves them out
// itself only when it can load the application's schema, which fails on the
// first generation of an app whose schema uses @idempotent: the directive is
// declared in the schema being generated. The application's files are those
// of the gqlgen configuration found as gqlgen finds it (in the working
// directory or above: entgql's tutorial runs ent's step in ent/), less
// entgql's own output, which this generation rewrites: the file that
// declares @idempotent (written by an earlier generation with idemgen) or
// entgql's @goModel (written by entgql alone, as in entgql's tutorial,
// before the app added idem). Taken for the app's, that file's scalars
// (Cursor) would be dropped from the schema that replaces it, and gqlgen
// would find them undefined.
func dropAppScalars(s *ast.Schema) error {
	cfg, err := appConfig()
	if err != nil || cfg == nil {
		return err
	}
	for _, src := range cfg.Sources {
		doc, err := parser.ParseSchema(src)
		if err != nil {
			return errorf("%v", err)
		}
		if doc.Directives.ForName(directive.Name) != nil || doc.Directives.ForName(entgqlDirective) != nil {
			continue // the schema this hook writes
		}
		for _, def := range doc.Definitions {
			if def.Kind == ast.Scalar && s.Types[def.Name] != nil && s.Types[def.Name].Kind == ast.Scalar {
				delete(s.Types, def.Name)
			}
		}
	}
	return nil
}

// entgqlDirective is a directive entgql's generated schema declares, and
// an application's own schema cannot (gqlgen refuses a directive declared
// twice).
const entgqlDirective = "goModel"

// appConfig loads the gqlgen configuration in the working directory or the
// nearest one above it in the module, with its schema files; nil if there
// is none. The
// configuration's paths are relative to its directory, which it is loaded
// from, as gqlgen does.
func appConfig() (*config.Config, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, errorf("%v", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		for _, name := range []string{".gqlgen.yml", "gqlgen.yml", "gqlgen.yaml"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				continue
			}
			if err := os.Chdir(dir); err != nil {
				return nil, errorf("%v", err)
			}
			cfg, err := config.LoadConfig(name)
			if cerr := os.Chdir(wd); cerr != nil {
				return nil, errorf("%v", cerr)
			}
			if err != nil {
				return nil, errorf("read %s: %v", filepath.Join(dir, name), err)
			}
			return cfg, nil
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil || filepath.Dir(dir) == dir {
			return nil, nil // not above the module's root
		}
	}
}

func (e *Extension) createField(r *Record) *ast.FieldDefinition {
	keyOptional := r.KeyOptional || e.keyOptional
	keyType := ast.NonNullNamedType("String", nil)
	keyDoc := "One key per intent, reused on every retry of it: the first request runs, every retry gets its stored result."
	if e.keyHeader || keyOptional {
		keyType = ast.NamedType("String", nil)
	}
	if e.keyHeader {
		keyDoc += " May be sent in the Idempotency-Key HTTP header instead."
	}
	if keyOptional {
		keyDoc += " Optional while clients adopt keys: a call without one is not retry-safe."
	}
	arg := func(name string, kind ast.ValueKind, raw string) *ast.Argument {
		return &ast.Argument{Name: name, Value: &ast.Value{Kind: kind, Raw: raw}}
	}
	dir := &ast.Directive{
		Name:      directive.Name,
		Location:  ast.LocationFieldDefinition,
		Arguments: ast.ArgumentList{arg(directive.ArgRecord, ast.StringValue, r.Type.Name)},
	}
	if r.Mode != "" {
		dir.Arguments = append(dir.Arguments, arg(directive.ArgMode, ast.EnumValue, r.Mode))
	}
	if r.LeaseSeconds > 0 {
		dir.Arguments = append(dir.Arguments, arg(directive.ArgLeaseSeconds, ast.IntValue, strconv.Itoa(r.LeaseSeconds)))
	}
	if keyOptional {
		dir.Arguments = append(dir.Arguments, arg(directive.ArgKeyRequired, ast.BooleanValue, "false"))
	}
	if r.NoRecover {
		dir.Arguments = append(dir.Arguments, arg(directive.ArgRecover, ast.BooleanValue, "false"))
	}
	if len(r.FingerprintExclude) > 0 {
		list := &ast.Value{Kind: ast.ListValue}
		for _, p := range r.FingerprintExclude {
			list.Children = append(list.Children, &ast.ChildValue{Value: &ast.Value{Kind: ast.StringValue, Raw: p}})
		}
		dir.Arguments = append(dir.Arguments, &ast.Argument{Name: directive.ArgFingerprintExclude, Value: list})
	}
	return &ast.FieldDefinition{
		Name:        "create" + r.GQLType,
		Description: "Creates one " + r.GQLType + ", at most once per idempotency key.",
		Arguments: ast.ArgumentDefinitionList{
			{Name: directive.KeyArgument, Type: keyType, Description: keyDoc},
			{Name: directive.InputArgument, Type: ast.NonNullNamedType(r.CreateInput(), nil)},
		},
		Type:       ast.NonNullNamedType(r.GQLType, nil),
		Directives: ast.DirectiveList{dir},
	}
}

func directiveDefinition() *ast.DirectiveDefinition {
	return &ast.DirectiveDefinition{
		Name: directive.Name,
		Description: "Makes a mutation retry-safe: the first request with an idempotency key runs it and stores its result, " +
			"every retry with the key gets that result. The mutation must take an idempotencyKey: String argument.",
		Arguments: ast.ArgumentDefinitionList{
			{Name: directive.ArgRecord, Type: ast.NamedType("String", nil),
				Description: "The ent type whose table holds the mutation's records (default " + directive.DefaultRecordEntity + ")."},
			{Name: directive.ArgMode, Type: ast.NamedType(ModeEnum, nil),
				Description: "LEASE (default) or ATOMIC."},
			{Name: directive.ArgLeaseSeconds, Type: ast.NamedType("Int", nil),
				Description: "How long a pending claim belongs to its attempt (default: the hook's lease)."},
			{Name: directive.ArgKeyRequired, Type: ast.NamedType("Boolean", nil),
				Description: "false while clients adopt keys: a call without a key runs as before, without idempotency (default true)."},
			{Name: directive.ArgRecover, Type: ast.NamedType("Boolean", nil),
				Description: "false for a mutation that must not run without a live client: the server never runs a claim its client abandoned again (default true)."},
			{Name: directive.ArgFingerprintExclude, Type: ast.ListType(ast.NonNullNamedType("String", nil), nil),
				Description: "Argument paths that do not count when a retry is compared with the first request, like \"input.clientTime\": a retry that changes only them replays the first result (default none)."},
			{Name: directive.ArgRetentionSeconds, Type: ast.NamedType("Int", nil),
				Description: "How long a finished result replays, in seconds, at most its record entity's retention (default: the record entity's retention)."},
		},
		Locations: []ast.DirectiveLocation{ast.LocationFieldDefinition},
	}
}

func modeEnum() *ast.Definition {
	return &ast.Definition{
		Kind:        ast.Enum,
		Name:        ModeEnum,
		Description: "How an idempotent mutation commits its claim, its writes and its result.",
		// Bound here rather than by the gqlgen plugin, so that gqlgen's own
		// model generation never sees it, whichever order the plugins run in.
		Directives: ast.DirectiveList{{
			Name:      "goModel",
			Arguments: ast.ArgumentList{{Name: "model", Value: &ast.Value{Kind: ast.StringValue, Raw: modeModel}}},
		}},
		EnumValues: ast.EnumValueList{
			{Name: directive.ModeLease, Description: "Commit the claim first, run, then commit the writes with the result while the claim is still owned. Safe for work outside the database."},
			{Name: directive.ModeAtomic, Description: "Claim, writes and result in one transaction; concurrent duplicates wait and replay. For effects inside the database only."},
		},
	}
}
