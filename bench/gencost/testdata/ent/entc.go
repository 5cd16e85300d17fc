//go:build ignore

package main

import (
	"log"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
	//IDEM "github.com/goovo/idem/idemgen"
)

func main() {
	var exts []entc.Extension
	var opts []entgql.ExtensionOption
	//IDEM ix, err := idemgen.NewExtension()
	//IDEM if err != nil {
	//IDEM 	log.Fatal(err)
	//IDEM }
	//IDEM exts, opts = append(exts, ix), append(opts, ix.EntGQLOption())
	gx, err := entgql.NewExtension(append([]entgql.ExtensionOption{
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath("graph/ent.graphql"),
		entgql.WithConfigPath("gqlgen.yml"),
		entgql.WithRelaySpec(false),
	}, opts...)...)
	if err != nil {
		log.Fatal(err)
	}
	if err := entc.Generate("./ent/schema", &gen.Config{}, entc.Extensions(append([]entc.Extension{gx}, exts...)...)); err != nil {
		log.Fatal(err)
	}
}
