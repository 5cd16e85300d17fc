//go:build ignore

package main

import (
	"log"

	"github.com/99designs/gqlgen/api"
	"github.com/99designs/gqlgen/codegen/config"
	//IDEM "github.com/goovo/idem/idemgen"
)

func main() {
	cfg, err := config.LoadConfigFromDefaultLocations()
	if err != nil {
		log.Fatal(err)
	}
	var opts []api.Option
	//IDEM opts = append(opts, api.PrependPlugin(idemgen.NewPlugin()))
	if err := api.Generate(cfg, opts...); err != nil {
		log.Fatal(err)
	}
}
