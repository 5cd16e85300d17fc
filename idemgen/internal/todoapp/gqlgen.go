//go:build ignore

// Runs gqlgen with idemgen's plugin, added after gqlgen's own (the position
// gqlgen's documentation shows; PrependPlugin works too). Run by go
// generate.
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
		log.Fatal(err)
	}
	if err := api.Generate(cfg, api.AddPlugin(idemgen.NewPlugin())); err != nil {
		log.Fatal(err)
	}
}
