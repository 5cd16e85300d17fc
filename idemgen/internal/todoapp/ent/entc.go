//go:build ignore

// Generates the ent package and graph/ent.graphql. Run by go generate.
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
		log.Fatal(err)
	}
	gx, err := entgql.NewExtension(
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath("graph/ent.graphql"),
		entgql.WithConfigPath("gqlgen.yml"),
		ix.EntGQLOption(),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := entc.Generate("./ent/schema", &gen.Config{}, entc.Extensions(gx, ix)); err != nil {
		log.Fatal(err)
	}
}
