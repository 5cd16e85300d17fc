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
	ix, err := idemgen.NewExtension()
	if err != nil {
		log.Fatalf("idemgen: %v", err)
	}
	gx, err := entgql.NewExtension(
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath("graph/ent.graphql"),
		entgql.WithConfigPath("gqlgen.yml"),
		// No node(id) query: it would read across tenants.
		entgql.WithRelaySpec(false),
		ix.EntGQLOption(),
	)
	if err != nil {
		log.Fatalf("entgql: %v", err)
	}
	if err := entc.Generate("./ent/schema", &gen.Config{}, entc.Extensions(gx, ix)); err != nil {
		log.Fatalf("ent codegen: %v", err)
	}
}
