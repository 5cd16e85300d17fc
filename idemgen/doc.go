// Package idemgen generates the code that connects ent entities carrying
// idemschema.Mixin to the runtime hook: an entc extension, used beside
// entgql, and a gqlgen plugin.
//
// # ent
//
//	ix, err := idemgen.NewExtension()              // idemgen.WithKeyHeader() for the header form
//	gx, err := entgql.NewExtension(entgql.WithSchemaGenerator(),
//		entgql.WithSchemaPath("graph/ent.graphql"), entgql.WithConfigPath("gqlgen.yml"),
//		ix.EntGQLOption())                          // adds the directive and the mutations
//	err = entc.Generate("./ent/schema", &gen.Config{}, entc.Extensions(gx, ix))
//
// The extension turns on ent's sql/upsert and sql/execquery features and
// writes idem.go into the ent package: client.IdempotencyBackend() for
// idem.Config, a Claimed<T>(ctx) accessor per record entity, and the claim
// insert, which builds the row from the mutation's input argument and from
// arguments named like the entity's fields (amount, paymentID). In the
// GraphQL schema it declares
//
//	directive @idempotent(record: String, mode: IdempotencyMode, leaseSeconds: Int) on FIELD_DEFINITION
//
// and gives every record entity (unless idemschema.NoCreateMutation) the
// mutation
//
//	create<T>(idempotencyKey: String!, input: Create<T>Input!): T! @idempotent(record: "<T>")
//
// The generated schema owns type Mutation; hand-written mutations go in
// "extend type Mutation" and opt in with @idempotent.
//
// # gqlgen
//
//	cfg, err := config.LoadConfigFromDefaultLocations()
//	err = api.Generate(cfg, api.PrependPlugin(idemgen.NewPlugin()))
//
// The plugin must come first (PrependPlugin) so that it binds the
// IdempotencyMode enum before gqlgen generates models. It checks that every
// @idempotent mutation takes idempotencyKey: String, leaves the directive to
// the runtime hook, and writes new resolvers of create<T> mutations as
// "return ent.Claimed<T>(ctx)", to which business logic may be added.
package idemgen
