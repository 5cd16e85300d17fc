// Command idemgen generates an application's code with the idempotency
// framework: ent's step (ent, entgql's GraphQL schema, and idemgen's
// extension), then gqlgen's (with idemgen's plugin). It is the program an
// application would otherwise write in two files (ent/entc.go and
// gqlgen.go: docs/adopting.md shows them). Run it where gqlgen.yml is, as
// go generate does:
//
//	//go:generate go run -mod=mod github.com/goovo/idem/idemgen/cmd/idemgen -key-header
//
// In a module whose go.sum does not have the generated code's requirements
// yet, run the steps apart with go mod tidy between them:
//
//	//go:generate go run -mod=mod github.com/goovo/idem/idemgen/cmd/idemgen -step ent
//	//go:generate go mod tidy
//	//go:generate go run -mod=mod github.com/goovo/idem/idemgen/cmd/idemgen -step gqlgen
//
// Flags:
//
//	-schema DIR       ent's schema package (default ./ent/schema)
//	-graphql FILE     the GraphQL schema entgql writes (default graph/ent.graphql)
//	-config FILE      gqlgen's configuration (default gqlgen.yml)
//	-key-header       idemgen.WithKeyHeader: the key may come in the Idempotency-Key header
//	-key-optional     idemgen.WithKeyOptional: every generated create's key is optional
//	-without-archive  idemgen.WithoutArchive
//	-relay            entgql's Relay types and node queries (default true)
//	-features LIST    more ent features, comma-separated (sql/lock, …)
//	-step STEP        all (default), ent or gqlgen
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"strings"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
	"github.com/99designs/gqlgen/codegen/config"

	"github.com/goovo/idem/idemgen"
)

func main() {
	log.SetFlags(0)
	var (
		schema      = flag.String("schema", "./ent/schema", "ent's schema package")
		graphql     = flag.String("graphql", "graph/ent.graphql", "the GraphQL schema entgql writes")
		configPath  = flag.String("config", "gqlgen.yml", "gqlgen's configuration")
		keyHeader   = flag.Bool("key-header", false, "the key may come in the Idempotency-Key header (idemgen.WithKeyHeader)")
		keyOptional = flag.Bool("key-optional", false, "every generated create's key is optional during a rollout (idemgen.WithKeyOptional)")
		noArchive   = flag.Bool("without-archive", false, "no idemschema.Archive entity (idemgen.WithoutArchive)")
		relay       = flag.Bool("relay", true, "entgql's Relay types and node queries (entgql.WithRelaySpec)")
		features    = flag.String("features", "", "more ent features, comma-separated (sql/lock, …)")
		step        = flag.String("step", "all", "all, ent or gqlgen")
	)
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: idemgen [flags]\n\nRuns ent's generation (with entgql and idemgen's extension), then gqlgen's (with idemgen's plugin), in the directory of gqlgen.yml.")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 || (*step != "all" && *step != "ent" && *step != "gqlgen") {
		flag.Usage()
		os.Exit(2)
	}
	if *step != "gqlgen" {
		var opts []idemgen.Option
		if *keyHeader {
			opts = append(opts, idemgen.WithKeyHeader())
		}
		if *keyOptional {
			opts = append(opts, idemgen.WithKeyOptional())
		}
		if *noArchive {
			opts = append(opts, idemgen.WithoutArchive())
		}
		var names []string
		if *features != "" {
			names = strings.Split(*features, ",")
		}
		if err := generateEnt(*schema, *graphql, *configPath, *relay, names, opts); err != nil {
			log.Fatal(err)
		}
	}
	if *step != "ent" {
		if err := generateGQL(*configPath); err != nil {
			log.Fatal(err)
		}
	}
}

// generateEnt is ent's step: the ent package, and entgql's GraphQL schema
// with idemgen's directive and create mutations.
func generateEnt(schema, graphql, configPath string, relay bool, features []string, opts []idemgen.Option) error {
	ix, err := idemgen.NewExtension(opts...)
	if err != nil {
		return err
	}
	gx, err := entgql.NewExtension(
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath(graphql),
		entgql.WithConfigPath(configPath),
		entgql.WithRelaySpec(relay),
		ix.EntGQLOption(),
	)
	if err != nil {
		return fmt.Errorf("entgql: %w", err)
	}
	genOpts := []entc.Option{entc.Extensions(gx, ix)}
	if len(features) > 0 {
		genOpts = append(genOpts, entc.FeatureNames(features...))
	}
	if err := entc.Generate(schema, &gen.Config{}, genOpts...); err != nil {
		return fmt.Errorf("ent: %w", err)
	}
	return nil
}

// generateGQL is gqlgen's step, with idemgen's plugin first, so that it
// checks the schema before gqlgen generates models; a failure leaves the
// generated files as they were (idemgen.Generate).
func generateGQL(configPath string) error {
	cfg, err := config.LoadConfig(configPath)
	if err != nil {
		return fmt.Errorf("gqlgen: %w", err)
	}
	if err := idemgen.Generate(cfg); err != nil {
		return fmt.Errorf("gqlgen: %w", err)
	}
	return nil
}
