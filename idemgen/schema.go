package idemgen

import (
	"fmt"
	"strconv"

	"entgo.io/ent/entc/gen"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/goovo/idem"
)

// ModeEnum is the GraphQL enum of the directive's mode argument.
const ModeEnum = "IdempotencyMode"

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
	s.Directives[idem.Directive] = directiveDefinition()
	s.AddTypes(modeEnum())

	var fields ast.FieldList
	for _, r := range recs {
		if !r.Create {
			continue
		}
		input := s.Types[r.CreateInput()]
		if input == nil {
			return fmt.Errorf("idemgen: %s: entgql did not generate %s; is entgql's mutation input generation on?", r.Type.Name, r.CreateInput())
		}
		fields = append(fields, e.createField(r))
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

func (e *Extension) createField(r *Record) *ast.FieldDefinition {
	keyType := ast.NonNullNamedType("String", nil)
	keyDoc := "One key per intent, reused on every retry of it: the first request runs, every retry gets its stored result."
	if e.keyHeader {
		keyType = ast.NamedType("String", nil)
		keyDoc += " May be sent in the Idempotency-Key HTTP header instead."
	}
	dir := &ast.Directive{
		Name:     idem.Directive,
		Location: ast.LocationFieldDefinition,
		Arguments: ast.ArgumentList{
			{Name: "record", Value: &ast.Value{Kind: ast.StringValue, Raw: r.Type.Name}},
		},
	}
	if r.Mode != "" {
		dir.Arguments = append(dir.Arguments, &ast.Argument{Name: "mode", Value: &ast.Value{Kind: ast.EnumValue, Raw: r.Mode}})
	}
	if r.LeaseSeconds > 0 {
		dir.Arguments = append(dir.Arguments, &ast.Argument{Name: "leaseSeconds", Value: &ast.Value{Kind: ast.IntValue, Raw: strconv.Itoa(r.LeaseSeconds)}})
	}
	return &ast.FieldDefinition{
		Name:        "create" + r.GQLType,
		Description: fmt.Sprintf("Creates one %s, at most once per idempotency key.", r.GQLType),
		Arguments: ast.ArgumentDefinitionList{
			{Name: idem.KeyArgument, Type: keyType, Description: keyDoc},
			{Name: idem.InputArgument, Type: ast.NonNullNamedType(r.CreateInput(), nil)},
		},
		Type:       ast.NonNullNamedType(r.GQLType, nil),
		Directives: ast.DirectiveList{dir},
	}
}

func directiveDefinition() *ast.DirectiveDefinition {
	return &ast.DirectiveDefinition{
		Name: idem.Directive,
		Description: "Makes a mutation retry-safe: the first request with an idempotency key runs it and stores its result, " +
			"every retry with the key gets that result. The mutation must take an idempotencyKey: String argument.",
		Arguments: ast.ArgumentDefinitionList{
			{Name: "record", Type: ast.NamedType("String", nil),
				Description: "The ent type whose table holds the mutation's records (default " + idem.DefaultRecordEntity + ")."},
			{Name: "mode", Type: ast.NamedType(ModeEnum, nil),
				Description: "LEASE (default) or ATOMIC."},
			{Name: "leaseSeconds", Type: ast.NamedType("Int", nil),
				Description: "How long a pending claim belongs to its attempt (default: the hook's lease)."},
		},
		Locations: []ast.DirectiveLocation{ast.LocationFieldDefinition},
	}
}

func modeEnum() *ast.Definition {
	return &ast.Definition{
		Kind:        ast.Enum,
		Name:        ModeEnum,
		Description: "How an idempotent mutation commits its claim, its writes and its result.",
		EnumValues: ast.EnumValueList{
			{Name: string(idem.ModeLease), Description: "Commit the claim first, run, then commit the writes with the result while the claim is still owned. Safe for work outside the database."},
			{Name: string(idem.ModeAtomic), Description: "Claim, writes and result in one transaction; concurrent duplicates wait and replay. For effects inside the database only."},
		},
	}
}
