//go:build ignore

// Generates the example's ent package and its GraphQL schema
// (graph/ent.graphql). Run by go generate from the repository root.
package main

import (
	"log"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/goovo/idem/idemgen"
)

func main() {
	// Clients may send the key in the Idempotency-Key header instead of the
	// argument: the generated idempotencyKey arguments are optional.
	ix, err := idemgen.NewExtension(idemgen.WithKeyHeader())
	if err != nil {
		log.Fatalf("idemgen: %v", err)
	}
	gx, err := entgql.NewExtension(
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath("graph/ent.graphql"),
		entgql.WithConfigPath("gqlgen.yml"),
		// No node(id) query: it would read across tenants, since the
		// example's entities are not isolated (idemschema.Mixin{Isolate:
		// true} would make it safe: see idemgen/internal/todoapp).
		entgql.WithRelaySpec(false),
		ix.EntGQLOption(),
	)
	if err != nil {
		log.Fatalf("entgql: %v", err)
	}
	if err := entc.Generate("./ent/schema", &gen.Config{},
		entc.Extensions(gx, ix),
		entc.FeatureNames("sql/lock"), // the page-view materializer locks the events it folds
	); err != nil {
		log.Fatalf("ent codegen: %v", err)
	}
}
