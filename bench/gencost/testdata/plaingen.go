//go:build ignore

// The plain variant's generation: ent with entgql, then gqlgen, as
// idemgen/cmd/idemgen runs them, without the library.
package main

import (
	"log"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
	"github.com/99designs/gqlgen/api"
	"github.com/99designs/gqlgen/codegen/config"
)

func main() {
	gx, err := entgql.NewExtension(
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath("graph/ent.graphql"),
		entgql.WithConfigPath("gqlgen.yml"),
		entgql.WithRelaySpec(false),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := entc.Generate("./ent/schema", &gen.Config{}, entc.Extensions(gx)); err != nil {
		log.Fatal(err)
	}
	cfg, err := config.LoadConfig("gqlgen.yml")
	if err != nil {
		log.Fatal(err)
	}
	if err := api.Generate(cfg); err != nil {
		log.Fatal(err)
	}
}
