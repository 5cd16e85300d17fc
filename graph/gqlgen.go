//go:build ignore

// Runs gqlgen with the idemgen plugin, first so that it binds the directive
// enum before gqlgen generates models. Run by go generate from the
// repository root.
package main

import (
	"log"

	"github.com/99designs/gqlgen/api"
	"github.com/99designs/gqlgen/codegen/config"

	"github.com/goovo/idem/idemgen"
)

func main() {
	cfg, err := config.LoadConfigFromDefaultLocations()
	if err != nil {
		log.Fatalf("gqlgen config: %v", err)
	}
	if err := api.Generate(cfg, api.PrependPlugin(idemgen.NewPlugin())); err != nil {
		log.Fatalf("gqlgen: %v", err)
	}
}
