package idemgen

import (
	"embed"
	"slices"
	"text/template"

	"entgo.io/ent/entc/gen"

	"github.com/goovo/idem/internal/directive"
)

// The templates of the extension, each generating one idem_*.go file of
// the ent package, in the manner of entgql's. They read the record
// entities with the idemRecords function and need ent's SQL storage.
var (
	// BackendTemplate generates idem_backend.go: client.IdempotencyBackend(),
	// the idembackend.Backend of the runtime hook, which lists every record table.
	BackendTemplate = parseT("template/backend.tmpl")

	// ClaimTemplate generates idem_claim.go: for each record entity, the
	// claim insert (INSERT … ON CONFLICT DO NOTHING on scope and key) of a
	// row built from the mutation's create input and from its arguments
	// named like the entity's fields and edges, with typed access to them.
	ClaimTemplate = parseT("template/claim.tmpl")

	// ClaimedTemplate generates idem_claimed.go: the Claimed<T>(ctx)
	// accessor of each record entity, with which a resolver starts from the
	// row its claim inserted.
	ClaimedTemplate = parseT("template/claimed.tmpl")

	// QueryTemplate generates idem_query.go: the storage-level predicate
	// method of each record entity's query builder, with which the mixin's
	// interceptor hides unfinished claims and other tenants' rows.
	QueryTemplate = parseT("template/query.tmpl")

	// IsolationTemplate generates idem_isolation.go: for each isolated
	// entity (idemschema.Mixin{Isolate: true}), the check that every row a
	// mutation links it to belongs to its tenant. Skipped when no entity is
	// isolated.
	IsolationTemplate = parseT("template/isolation.tmpl").SkipIf(noIsolation)

	// GuardTemplate generates idem_guard.go: the hook, first on every
	// entity of every client of the package, that refuses a write outside
	// the claim's transaction while an idempotent mutation's resolver runs
	// (idembackend.ErrWriteOutsideClaim).
	GuardTemplate = parseT("template/guard.tmpl")

	// AllTemplates holds every template of the extension.
	AllTemplates = []*gen.Template{
		BackendTemplate,
		GuardTemplate,
		ClaimTemplate,
		ClaimedTemplate,
		QueryTemplate,
		IsolationTemplate,
	}

	// TemplateFuncs are the functions the templates use besides ent's.
	TemplateFuncs = template.FuncMap{
		"idemRecords":          records,
		"idemArchive":          archiveType,
		"idemIsolationTargets": isolationTargets,
		"idemInputArgument":    func() string { return directive.InputArgument },
		"idemCompletable":      completable,
	}

	//go:embed template/*.tmpl
	templateFS embed.FS
)

func parseT(path string) *gen.Template {
	return gen.MustParse(gen.NewTemplate(path).Funcs(TemplateFuncs).ParseFS(templateFS, path))
}

// isolationTargets returns the entities isolated entities link to, each
// once: the packages idem_isolation.go imports.
func isolationTargets(g *gen.Graph) ([]*gen.Type, error) {
	recs, err := records(g)
	if err != nil {
		return nil, err
	}
	var targets []*gen.Type
	for _, r := range recs {
		for _, ie := range r.IsolatedEdges {
			if !slices.Contains(targets, ie.Target.Type) {
				targets = append(targets, ie.Target.Type)
			}
		}
	}
	return targets, nil
}

// noIsolation reports that no entity of g is isolated.
func noIsolation(g *gen.Graph) bool {
	recs, err := records(g)
	if err != nil {
		return false // the template reports it
	}
	for _, r := range recs {
		if r.Isolate {
			return false
		}
	}
	return true
}

// completable reports whether a claim of t can be born completed (the
// generated prepare<T>): its id is known before the INSERT (an ent
// default), or an integer the database assigns, which the one statement
// reads from the sequence and writes into the answer.
func completable(t *gen.Type) bool {
	if t.ID == nil {
		return false
	}
	return t.ID.Default || (t.ID.Type.Numeric() && !t.ID.Type.ValueScanner() && !t.ID.UserDefined)
}
