package idemgen

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc/gen"
	"entgo.io/ent/schema/field"

	"github.com/goovo/idem/idemschema"
	"github.com/goovo/idem/internal/directive"
)

// Record is what the templates know of one record entity: an ent type that
// carries idemschema.Mixin.
type Record struct {
	Type *gen.Type
	// Scope is the field that holds the tenant.
	Scope *gen.Field
	// Status is the idempotency_status enum field.
	Status *gen.Field
	// GQLType is the entity's GraphQL type name.
	GQLType string
	// Create reports whether the entity gets a generated create mutation.
	Create bool
	// Input reports that entgql generates Create<T>Input for the entity: a
	// claim takes the mutation's input argument of that type.
	Input bool
	// Mode and LeaseSeconds configure the create mutation.
	Mode         string
	LeaseSeconds int
	// KeyOptional makes the create mutation's key optional (a rollout).
	KeyOptional bool
	// NoRecover keeps the recoverer from running the create mutation's
	// abandoned claims again (idemschema.NoRecover).
	NoRecover bool
	// RetentionSeconds overrides the hook's retention window; 0 keeps it.
	RetentionSeconds int
	// FingerprintExclude are the create mutation's argument paths that do
	// not count in the fingerprint (idemschema.FingerprintExclude).
	FingerprintExclude []string
	// Isolate is idemschema.Mixin.Isolate.
	Isolate bool
	// Args are the fields and edges a claim row takes from the mutation's
	// arguments of the same GraphQL name, so that a hand-written mutation
	// can use the entity as its record.
	Args []*Arg
	// IsolatedEdges are the edges to isolated entities, whose targets must
	// belong to the row's tenant.
	IsolatedEdges []*IsolatedEdge
}

// Arg is a field or an edge of a record entity that a claim sets from a
// mutation argument: one entgql puts into the entity's create input (a
// field entgql skips on create is never set from an argument).
type Arg struct {
	// Names are the argument names that set it: the name entgql gives it in
	// the create input, then the names entgql.MapsTo gives the field.
	Names []string
	// Name is the ent field or edge, for messages.
	Name string
	// Setter is the create builder's method; it takes one Type, or, with
	// Many, several IDs.
	Setter string
	// Type is the value's Go type as the ent package writes it.
	Type string
	// Many: the setter adds IDs of a to-many edge (childIDs).
	Many bool
}

// IsolatedEdge is an edge of an isolated entity to an isolated entity.
type IsolatedEdge struct {
	// Edge is the edge of the entity.
	Edge *gen.Edge
	// Target is the record entity it links to.
	Target *Record
}

// RecordOnly reports that the entity has nothing but the mixin's fields.
func (r *Record) RecordOnly() bool { return len(r.Args) == 0 && len(r.Type.Edges) == 0 }

// CreateInput is the name of the entity's GraphQL (and Go) create input.
func (r *Record) CreateInput() string { return "Create" + r.GQLType + "Input" }

// ArgsType names the struct of the ent package that lists the claim's
// arguments and their Go types, which the gqlgen plugin reads.
func (r *Record) ArgsType() string { return "idem" + r.Type.Name + "Args" }

var (
	camel    = gen.Funcs["camel"].(func(string) string)
	singular = gen.Funcs["singular"].(func(string) string)
)

// errorf returns an error of the ent side of the generator. entc prints it
// as it is: the prefix says where it comes from.
func errorf(format string, args ...any) error {
	return fmt.Errorf("idemgen: "+format, args...)
}

// records collects the entities that carry the mixin and checks them.
func records(g *gen.Graph) ([]*Record, error) {
	var recs []*Record
	byType := map[*gen.Type]*Record{}
	for _, t := range g.Nodes {
		raw, ok := t.Annotations[idemschema.Annotation{}.Name()]
		if !ok {
			continue
		}
		var ant idemschema.Annotation
		if err := ant.Decode(raw); err != nil {
			return nil, errorf("%s: %v", t.Name, err)
		}
		r := &Record{
			Type: t, GQLType: t.Name, Create: !ant.NoCreate, Mode: ant.Mode, LeaseSeconds: ant.LeaseSeconds,
			RetentionSeconds: ant.RetentionSeconds, KeyOptional: ant.KeyOptional, Isolate: ant.Isolate,
			NoRecover: ant.NoRecover, FingerprintExclude: ant.FingerprintExclude,
		}
		switch ant.Mode {
		case "", directive.ModeLease, directive.ModeAtomic:
		default:
			return nil, errorf("%s: unknown mode %q (want %q or %q)", t.Name, ant.Mode, directive.ModeLease, directive.ModeAtomic)
		}
		if ant.LeaseSeconds < 0 || ant.RetentionSeconds < 0 {
			return nil, errorf("%s: lease and retention must be positive", t.Name)
		}
		for _, f := range t.Fields {
			switch f.Name {
			case ant.ScopeField:
				r.Scope = f
			case idemschema.FieldStatus:
				r.Status = f
			}
		}
		if r.Scope == nil {
			return nil, errorf("%s: scope field %q does not exist", t.Name, ant.ScopeField)
		}
		if r.Scope.Type.Type != field.TypeString || r.Scope.Optional || r.Scope.Nillable {
			return nil, errorf("%s: scope field %q must be a required string field (keys are unique per tenant; a NULL tenant would make them global)", t.Name, r.Scope.Name)
		}
		if r.Status == nil {
			return nil, errorf("%s: has the idempotency annotation but not the fields of idemschema.Mixin", t.Name)
		}
		gqlAnt, err := entgqlAnnotation(t.Annotations)
		if err != nil {
			return nil, errorf("%s: %v", t.Name, err)
		}
		if gqlAnt.Type != "" {
			r.GQLType = gqlAnt.Type
		}
		if r.Create && gqlAnt.Skip.Is(entgql.SkipType) {
			return nil, errorf("%s: is skipped by entgql, so it cannot have a create mutation; add idemschema.NoCreateMutation() to its annotations", t.Name)
		}
		r.Input = !gqlAnt.Skip.Is(entgql.SkipMutationCreateInput) &&
			slices.ContainsFunc(gqlAnt.MutationInputs, func(m entgql.MutationConfig) bool { return m.IsCreate })
		if r.Args, err = claimArgs(r); err != nil {
			return nil, err
		}
		recs = append(recs, r)
		byType[t] = r
	}
	for _, r := range recs {
		if !r.Isolate {
			continue
		}
		for _, e := range r.Type.Edges {
			if target := byType[e.Type]; target != nil && target.Isolate && !e.Type.IsEdgeSchema() {
				r.IsolatedEdges = append(r.IsolatedEdges, &IsolatedEdge{Edge: e, Target: target})
			}
		}
	}
	return recs, nil
}

// claimArgs lists what a claim of r takes from arguments: the fields and
// edges of entgql's create input for the entity (whether or not entgql
// generates it), under the names entgql gives them.
func claimArgs(r *Record) ([]*Arg, error) {
	var args []*Arg
	seen := map[string]string{}
	add := func(a *Arg, mapsTo []string) error {
		names := append(a.Names, mapsTo...)
		a.Names = nil
		for _, n := range names {
			if owner, ok := seen[n]; ok {
				if owner == a.Name {
					continue
				}
				return errorf("%s: the GraphQL name %q is both %s's and %s's (entgql.MapsTo); a claim could not tell which to set", r.Type.Name, n, owner, a.Name)
			}
			seen[n] = a.Name
			a.Names = append(a.Names, n)
		}
		args = append(args, a)
		return nil
	}
	edgeOf := map[*gen.Field]*gen.Edge{}
	for _, e := range r.Type.Edges {
		if f := e.Field(); f != nil {
			edgeOf[f] = e
		}
	}
	for _, f := range r.Type.Fields {
		if f == r.Scope || strings.HasPrefix(f.Name, "idempotency_") {
			continue
		}
		fant, err := entgqlAnnotation(f.Annotations)
		if err != nil {
			return nil, errorf("%s.%s: %v", r.Type.Name, f.Name, err)
		}
		if e := edgeOf[f]; e != nil {
			// entgql's input sets an edge field through its edge.
			eant, err := entgqlAnnotation(e.Annotations)
			if err != nil {
				return nil, errorf("%s.%s: %v", r.Type.Name, e.Name, err)
			}
			if eant.Skip.Is(entgql.SkipMutationCreateInput) || e.Type.IsEdgeSchema() {
				continue
			}
			a := &Arg{Names: []string{camel(e.Name) + "ID", camel(f.Name)}, Name: f.Name, Setter: f.MutationSet(), Type: f.Type.String()}
			if err := add(a, fant.Mapping); err != nil {
				return nil, err
			}
			continue
		}
		if fant.Skip.Is(entgql.SkipMutationCreateInput) {
			continue
		}
		a := &Arg{Names: []string{camel(f.Name)}, Name: f.Name, Setter: f.MutationSet(), Type: f.Type.String()}
		if err := add(a, fant.Mapping); err != nil {
			return nil, err
		}
	}
	for _, e := range r.Type.Edges {
		if e.Field() != nil || e.Type.IsEdgeSchema() {
			continue
		}
		eant, err := entgqlAnnotation(e.Annotations)
		if err != nil {
			return nil, errorf("%s.%s: %v", r.Type.Name, e.Name, err)
		}
		if eant.Skip.Is(entgql.SkipMutationCreateInput) {
			continue
		}
		a := &Arg{Name: e.Name, Type: e.Type.ID.Type.String()}
		if e.Unique {
			a.Names, a.Setter = []string{camel(e.Name) + "ID"}, e.MutationSet()
		} else {
			a.Names, a.Setter, a.Many = []string{camel(singular(e.Name)) + "IDs"}, e.MutationAdd(), true
		}
		if err := add(a, nil); err != nil {
			return nil, err
		}
	}
	return args, nil
}

// prepareInputs makes entgql generate Create<T>Input for the entity (the
// mixin means "give me a retry-safe create mutation") and keeps the scope
// field out of every mutation input: the tenant comes from the request's
// context, never from an argument.
func prepareInputs(t *gen.Type, r *Record) error {
	ant, err := entgqlAnnotation(t.Annotations)
	if err != nil {
		return errorf("%s: %v", t.Name, err)
	}
	if r.Create && !slices.ContainsFunc(ant.MutationInputs, func(m entgql.MutationConfig) bool { return m.IsCreate }) {
		ant.MutationInputs = append(ant.MutationInputs, entgql.MutationConfig{IsCreate: true})
		t.Annotations[ant.Name()] = ant
	}
	fant, err := entgqlAnnotation(r.Scope.Annotations)
	if err != nil {
		return errorf("%s.%s: %v", t.Name, r.Scope.Name, err)
	}
	fant.Skip |= entgql.SkipMutationCreateInput | entgql.SkipMutationUpdateInput
	if r.Scope.Annotations == nil {
		r.Scope.Annotations = gen.Annotations{}
	}
	r.Scope.Annotations[fant.Name()] = fant
	return nil
}

func entgqlAnnotation(ants gen.Annotations) (*entgql.Annotation, error) {
	ant := &entgql.Annotation{}
	if ants == nil {
		return ant, nil
	}
	raw, ok := ants[ant.Name()]
	if !ok {
		return ant, nil
	}
	if a, ok := raw.(*entgql.Annotation); ok {
		return a, nil
	}
	if a, ok := raw.(entgql.Annotation); ok {
		return &a, nil
	}
	if err := ant.Decode(raw); err != nil {
		return nil, errors.New("cannot decode the entgql annotation: " + err.Error())
	}
	return ant, nil
}
