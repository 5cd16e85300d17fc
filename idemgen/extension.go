package idemgen

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/goovo/idem/idemschema"
)

// Extension is the entc extension of the idempotency framework. Use it next
// to entgql, passing its EntGQLOption to entgql:
//
//	ix, err := idemgen.NewExtension()
//	gx, err := entgql.NewExtension(entgql.WithSchemaGenerator(), ..., ix.EntGQLOption())
//	err = entc.Generate("./schema", &gen.Config{}, entc.Extensions(gx, ix))
//
// For every ent type with idemschema.Mixin it generates the record store
// glue in the ent package (AllTemplates) and, in the GraphQL schema, a
// mutation create<T>(idempotencyKey: String!, input: Create<T>Input!): T!
// marked @idempotent. It also declares the @idempotent directive, with
// which hand-written mutations opt in.
type Extension struct {
	entc.DefaultExtension
	keyHeader   bool
	keyOptional bool
	noArchive   bool
}

// Option configures the Extension.
type Option func(*Extension) error

// WithKeyHeader declares that clients may send the key in the
// Idempotency-Key HTTP header instead of the argument: the generated
// idempotencyKey arguments become optional (String) and the hook requires
// the key from one of the two places. Enable the hook's Config.KeyHeader too.
func WithKeyHeader() Option {
	return func(e *Extension) error {
		e.keyHeader = true
		return nil
	}
}

// WithKeyOptional is idemschema.KeyOptional for every generated create
// mutation: during a rollout, their key argument is optional
// (idempotencyKey: String) and a call without a key runs as the mutation did
// before, with no claim and no record, counted in the hook's idem.keyless
// metric. Remove the option once the metric stays at zero.
func WithKeyOptional() Option {
	return func(e *Extension) error {
		e.keyOptional = true
		return nil
	}
}

// WithoutArchive lets an ent package with record entities have no
// idemschema.Archive entity. Its records then keep their responses past the
// retention window (a retry still gets IDEMPOTENCY_KEY_EXPIRED), and
// idem.Admin.Sweep fails with idem.ErrNoArchive. Without this option, a
// missing archive is an error at generation time.
func WithoutArchive() Option {
	return func(e *Extension) error {
		e.noArchive = true
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

// Templates of the extension: AllTemplates.
func (e *Extension) Templates() []*gen.Template { return AllTemplates }

// Hooks of the extension: check the schema and prepare entgql's inputs
// before any code is generated, so that every mistake the hook would find
// at server start is reported here.
func (e *Extension) Hooks() []gen.Hook {
	return []gen.Hook{func(next gen.Generator) gen.Generator {
		return gen.GenerateFunc(func(g *gen.Graph) error {
			recs, err := e.check(g)
			if err != nil {
				return err
			}
			for _, r := range recs {
				if err := prepareInputs(r.Type, r); err != nil {
					return err
				}
			}
			return next.Generate(g)
		})
	}}
}

// check reports the first thing in g that the generated code or the hook
// could not work with.
func (e *Extension) check(g *gen.Graph) ([]*Record, error) {
	if g.Storage == nil || g.Storage.Name != "sql" {
		return nil, errorf("the idempotency records need ent's SQL storage")
	}
	recs, err := records(g)
	if err != nil {
		return nil, err
	}
	archive, err := archiveType(g)
	if err != nil {
		return nil, err
	}
	if len(recs) > 0 && archive == nil && !e.noArchive {
		return nil, errorf("no idemschema.Archive entity: the sweeper moves expired responses there. Add it to the schema package,\n\n\ttype IdempotencyArchive struct{ idemschema.Archive }\n\nor generate with idemgen.WithoutArchive() to keep every response in its record")
	}
	return recs, nil
}

// EntGQLOption returns the entgql option that adds the directive and the
// create mutations to the generated GraphQL schema.
func (e *Extension) EntGQLOption() entgql.ExtensionOption {
	return entgql.WithSchemaHook(e.schemaHook)
}

// archiveType returns the package's idemschema.Archive entity, if any.
func archiveType(g *gen.Graph) (*gen.Type, error) {
	var found *gen.Type
	for _, t := range g.Nodes {
		if _, ok := t.Annotations[idemschema.ArchiveAnnotation{}.Name()]; !ok {
			continue
		}
		if found != nil {
			return nil, errorf("two archive entities, %s and %s; one serves every record table", found.Name, t.Name)
		}
		found = t
	}
	return found, nil
}

var _ entc.Extension = (*Extension)(nil)
