//go:build ignore

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
	if err := api.Generate(cfg, api.PrependPlugin(idemgen.NewPlugin())); err != nil {
		log.Fatal(err)
	}
}
