package idemgen

import (
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
	"entgo.io/ent/schema/field"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemschema"
)

//go:embed template/*.tmpl
var templateFS embed.FS

// Template generates idem.go in the ent package: the Backend of the runtime
// hook (client.IdempotencyBackend()), one Claimed<T> accessor per record
// entity, and the query method the mixin's interceptor uses.
var Template = gen.MustParse(gen.NewTemplate("idem").ParseFS(templateFS, "template/idem.tmpl"))

// Extension is the entc extension of the idempotency framework. Use it next
// to entgql, passing its EntGQLOption to entgql:
//
//	ix, err := idemgen.NewExtension()
//	gx, err := entgql.NewExtension(entgql.WithSchemaGenerator(), ..., ix.EntGQLOption())
//	err = entc.Generate("./schema", &gen.Config{}, entc.Extensions(gx, ix))
//
// For every ent type with idemschema.Mixin it generates the record store
// glue in the ent package and, in the GraphQL schema, a mutation
// create<T>(idempotencyKey: String!, input: Create<T>Input!): T! marked
// @idempotent. It also declares the @idempotent directive, with which
// hand-written mutations opt in.
type Extension struct {
	entc.DefaultExtension
	keyHeader bool
}

// Option configures the Extension.
type Option func(*Extension) error

// WithKeyHeader declares that clients may send the key in the
// Idempotency-Key HTTP header instead of the argument: the generated
// idempotencyKey argument becomes optional (String) and the hook requires
// the key from one of the two places. Enable the hook's Config.KeyHeader too.
func WithKeyHeader() Option {
	return func(e *Extension) error {
		e.keyHeader = true
		return nil
	}
}

// NewExtension returns the extension with opts applied.
func NewExtension(opts ...Option) (*Extension, error) {
	e := &Extension{}
	for _, opt := range opts {
		if err := opt(e); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Options enables the ent features the generated code uses: upserts for the
// claim (INSERT … ON CONFLICT DO NOTHING) and raw SQL on clients and
// transactions for the record store.
func (e *Extension) Options() []entc.Option {
	return []entc.Option{entc.FeatureNames("sql/upsert", "sql/execquery")}
}

// Templates of the extension.
func (e *Extension) Templates() []*gen.Template { return []*gen.Template{Template} }

// Hooks of the extension: check the record entities and prepare entgql's
// inputs before the code is generated.
func (e *Extension) Hooks() []gen.Hook {
	return []gen.Hook{func(next gen.Generator) gen.Generator {
		return gen.GenerateFunc(func(g *gen.Graph) error {
			recs, err := records(g)
			if err != nil {
				return err
			}
			for _, r := range recs {
				if err := prepareInputs(r); err != nil {
					return err
				}
			}
			if g.Annotations == nil {
				g.Annotations = gen.Annotations{}
			}
			g.Annotations[annotationKey] = recs
			archive, err := archiveType(g)
			if err != nil {
				return err
			}
			g.Annotations[archiveKey] = archive
			return next.Generate(g)
		})
	}}
}

// EntGQLOption returns the entgql option that adds the directive and the
// create mutations to the generated GraphQL schema.
func (e *Extension) EntGQLOption() entgql.ExtensionOption {
	return entgql.WithSchemaHook(e.schemaHook)
}

const (
	annotationKey = "IdemGen"
	archiveKey    = "IdemGenArchive"
)

// archiveType returns the package's idemschema.Archive entity, if any.
func archiveType(g *gen.Graph) (*gen.Type, error) {
	var found *gen.Type
	for _, t := range g.Nodes {
		if _, ok := t.Annotations[idemschema.ArchiveAnnotation{}.Name()]; !ok {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("idemgen: two archive entities, %s and %s; one serves every record table", found.Name, t.Name)
		}
		found = t
	}
	return found, nil
}

// Record is what the template knows of one record entity.
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
	// Mode and LeaseSeconds configure that mutation.
	Mode         string
	LeaseSeconds int
	// ArgFields and ArgEdges are the entity's own fields and unique edges:
	// a claim row takes their values from the mutation's arguments of the
	// same GraphQL name (amount, paymentID), so that a hand-written mutation
	// can use the entity as its record.
	ArgFields []*gen.Field
	ArgEdges  []*gen.Edge
	// RetentionSeconds overrides the hook's retention window.
	RetentionSeconds int
}

// RecordOnly reports that the entity has nothing but the mixin's fields.
func (r *Record) RecordOnly() bool { return len(r.ArgFields) == 0 && len(r.Type.Edges) == 0 }

// CreateInput is the name of the entity's GraphQL (and Go) create input.
func (r *Record) CreateInput() string { return "Create" + r.GQLType + "Input" }

// records collects the entities that carry the mixin and checks them.
func records(g *gen.Graph) ([]*Record, error) {
	var recs []*Record
	for _, t := range g.Nodes {
		raw, ok := t.Annotations[idemschema.Annotation{}.Name()]
		if !ok {
			continue
		}
		var ant idemschema.Annotation
		if err := ant.Decode(raw); err != nil {
			return nil, fmt.Errorf("idemgen: %s: %w", t.Name, err)
		}
		r := &Record{Type: t, GQLType: t.Name, Create: !ant.NoCreate, Mode: ant.Mode, LeaseSeconds: ant.LeaseSeconds, RetentionSeconds: ant.RetentionSeconds}
		switch idem.Mode(ant.Mode) {
		case "", idem.ModeLease, idem.ModeAtomic:
		default:
			return nil, fmt.Errorf("idemgen: %s: unknown mode %q (want %q or %q)", t.Name, ant.Mode, idem.ModeLease, idem.ModeAtomic)
		}
		if ant.LeaseSeconds < 0 || ant.RetentionSeconds < 0 {
			return nil, fmt.Errorf("idemgen: %s: lease and retention must be positive", t.Name)
		}
		for _, f := range t.Fields {
			switch f.Name {
			case ant.ScopeField:
				r.Scope = f
			case idemschema.FieldStatus:
				r.Status = f
			}
		}
		for _, f := range t.Fields {
			if f != r.Scope && !strings.HasPrefix(f.Name, "idempotency_") {
				r.ArgFields = append(r.ArgFields, f)
			}
		}
		for _, e := range t.Edges {
			if e.Unique && e.Field() == nil && !e.Immutable {
				r.ArgEdges = append(r.ArgEdges, e)
			}
		}
		if r.Scope == nil {
			return nil, fmt.Errorf("idemgen: %s: scope field %q does not exist", t.Name, ant.ScopeField)
		}
		if r.Scope.Type.Type != field.TypeString || r.Scope.Optional || r.Scope.Nillable {
			return nil, fmt.Errorf("idemgen: %s: scope field %q must be a required string field (keys are unique per tenant; a NULL tenant would make them global)", t.Name, r.Scope.Name)
		}
		if r.Status == nil {
			return nil, fmt.Errorf("idemgen: %s: has the idempotency annotation but not the fields of idemschema.Mixin", t.Name)
		}
		gqlAnt, err := entgqlAnnotation(t.Annotations)
		if err != nil {
			return nil, fmt.Errorf("idemgen: %s: %w", t.Name, err)
		}
		if gqlAnt.Type != "" {
			r.GQLType = gqlAnt.Type
		}
		if r.Create && gqlAnt.Skip.Is(entgql.SkipType) {
			return nil, fmt.Errorf("idemgen: %s: is skipped by entgql, so it cannot have a create mutation; add idemschema.NoCreateMutation()", t.Name)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// prepareInputs makes entgql generate Create<T>Input for the entity (the
// mixin means "give me a retry-safe create mutation") and keeps the scope
// field out of every mutation input: the tenant comes from the request's
// context, never from an argument.
func prepareInputs(r *Record) error {
	t := r.Type
	ant, err := entgqlAnnotation(t.Annotations)
	if err != nil {
		return fmt.Errorf("idemgen: %s: %w", t.Name, err)
	}
	if r.Create && !slices.ContainsFunc(ant.MutationInputs, func(m entgql.MutationConfig) bool { return m.IsCreate }) {
		ant.MutationInputs = append(ant.MutationInputs, entgql.MutationConfig{IsCreate: true})
		t.Annotations[ant.Name()] = ant
	}
	fant, err := entgqlAnnotation(r.Scope.Annotations)
	if err != nil {
		return fmt.Errorf("idemgen: %s.%s: %w", t.Name, r.Scope.Name, err)
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

var _ entc.Extension = (*Extension)(nil)
