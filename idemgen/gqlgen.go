package idemgen

import (
	"fmt"
	"go/types"

	"github.com/99designs/gqlgen/codegen"
	"github.com/99designs/gqlgen/codegen/config"
	"github.com/99designs/gqlgen/codegen/templates"
	"github.com/99designs/gqlgen/plugin"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/goovo/idem"
)

// Plugin is the gqlgen side of the generator. Run gqlgen with it:
//
//	cfg, err := config.LoadConfigFromDefaultLocations()
//	err = api.Generate(cfg, api.AddPlugin(idemgen.NewPlugin()))
//
// It checks that every @idempotent mutation takes the key argument, binds
// the directive's enum to idem.Mode, leaves the directive to the runtime hook
// (no directive function to write), and writes the resolver of each
// generated create<T> mutation.
type Plugin struct{}

// NewPlugin returns the gqlgen plugin.
func NewPlugin() *Plugin { return &Plugin{} }

var (
	_ plugin.ConfigMutator       = (*Plugin)(nil)
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
	cfg.Directives[idem.Directive] = config.DirectiveConfig{SkipRuntime: true}
	if !cfg.Models.Exists(ModeEnum) {
		cfg.Models.Add(ModeEnum, "github.com/goovo/idem.Mode")
	}
	return CheckSchema(cfg.Schema)
}

// CheckSchema reports the first @idempotent mutation that cannot work: one
// without an idempotencyKey: String argument, or a directive outside
// Mutation.
func CheckSchema(s *ast.Schema) error {
	for _, def := range s.Types {
		for _, f := range def.Fields {
			if f.Directives.ForName(idem.Directive) == nil {
				continue
			}
			if s.Mutation == nil || def.Name != s.Mutation.Name {
				return fmt.Errorf("idemgen: %s.%s: @%s applies to mutation fields only", def.Name, f.Name, idem.Directive)
			}
			arg := f.Arguments.ForName(idem.KeyArgument)
			if arg == nil || arg.Type.Elem != nil || arg.Type.NamedType != "String" {
				return fmt.Errorf("idemgen: %s.%s is @%s and needs the argument %s: String! (or String with the Idempotency-Key header)",
					def.Name, f.Name, idem.Directive, idem.KeyArgument)
			}
		}
	}
	return nil
}

// Implement implements plugin.ResolverImplementer. A resolver that exists is
// kept as it is; a new generated create<T> mutation starts as
// "return ent.Claimed<T>(ctx)", to which the application may add its
// business logic; any other new resolver gets gqlgen's usual stub.
func (*Plugin) Implement(prev string, f *codegen.Field) string {
	if prev != "" {
		return prev
	}
	if body, ok := createBody(f); ok {
		return body
	}
	return fmt.Sprintf("panic(fmt.Errorf(\"not implemented: %v - %v\"))", f.GoFieldName, f.Name)
}

// createBody returns the body of a create<T> resolver whose records are the
// T it returns.
func createBody(f *codegen.Field) (string, bool) {
	if f.FieldDefinition == nil || f.TypeReference == nil {
		return "", false
	}
	d := f.FieldDefinition.Directives.ForName(idem.Directive)
	if d == nil || f.FieldDefinition.Arguments.ForName(idem.InputArgument) == nil {
		return "", false
	}
	rec := d.Arguments.ForName("record")
	if rec == nil || rec.Value == nil {
		return "", false
	}
	t := f.TypeReference.GO
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	named, ok := t.(*types.Named)
	if !ok || named.Obj().Name() != rec.Value.Raw || named.Obj().Pkg() == nil {
		return "", false
	}
	pkg := templates.CurrentImports.Lookup(named.Obj().Pkg().Path())
	return fmt.Sprintf("return %s.Claimed%s(ctx)", pkg, named.Obj().Name()), true
}
