// Package idemgen generates the code that connects ent entities carrying
// idemschema.Mixin to the runtime hook: an entc extension, used beside
// entgql, and a gqlgen plugin. The command idemgen/cmd/idemgen runs both,
// ent's step first, from go generate (its flags select the options below):
//
//	//go:generate go run -mod=mod github.com/goovo/idem/idemgen/cmd/idemgen
//
// A program of the application's own does the same in two steps:
//
// # ent's step
//
//	ix, err := idemgen.NewExtension()              // options: WithKeyHeader, WithKeyOptional, WithoutArchive
//	gx, err := entgql.NewExtension(entgql.WithSchemaGenerator(),
//		entgql.WithSchemaPath("graph/ent.graphql"), entgql.WithConfigPath("gqlgen.yml"),
//		ix.EntGQLOption())                          // adds the directive and the mutations
//	err = entc.Generate("./ent/schema", &gen.Config{}, entc.Extensions(gx, ix))
//
// The extension turns on ent's sql/execquery feature (and sql/upsert) and
// writes the idem_*.go files of AllTemplates into the ent package:
// client.IdempotencyBackend() for idem.Config, a Claimed<T>(ctx) accessor
// per record entity, and the claim insert. A claim builds its row from the
// mutation's input argument (entgql's Create<T>Input) and from the
// arguments named as entgql names the entity's fields and edges in
// GraphQL: the create input's names (amount, paymentID, childIDs) and
// entgql.MapsTo's (priorityOrder). A field entgql skips on create
// (entgql.Skip(entgql.SkipMutationCreateInput)) is never set from an
// argument. In the GraphQL schema it declares
//
//	directive @idempotent(record: String, mode: IdempotencyMode, leaseSeconds: Int, keyRequired: Boolean,
//		recover: Boolean, fingerprintExclude: [String!], retentionSeconds: Int) on FIELD_DEFINITION
//
// (fingerprintExclude: argument paths, like "input.clientTime", that a
// retry may change and still replay; retentionSeconds: a replay window
// shorter than the record entity's)
// and gives every record entity (unless idemschema.NoCreateMutation) the
// mutation
//
//	create<T>(idempotencyKey: String!, input: Create<T>Input!): T! @idempotent(record: "<T>")
//
// The generated schema owns type Mutation; hand-written mutations go in
// "extend type Mutation" and opt in with @idempotent. The ent package needs
// an idemschema.Archive entity (the sweeper's archive; WithoutArchive to do
// without), and the IdempotencyRecord entity (idemschema.Record) if a
// hand-written mutation names no record entity. Only ent's SQL storage is
// supported.
//
// # gqlgen's step
//
//	cfg, err := config.LoadConfigFromDefaultLocations()
//	err = idemgen.Generate(cfg)
//
// Generate is api.Generate(cfg, api.PrependPlugin(idemgen.NewPlugin())),
// which leaves the generated files as they were when it fails (gqlgen
// alone deletes them before it reads the schema). api.AddPlugin works as
// well: the directive's enum is bound to idem.Mode
// in the generated schema (@goModel), so gqlgen's model generation never
// writes it. The plugin leaves the directive to the runtime hook, writes
// "return ent.Claimed<T>(ctx)" into each new resolver of a mutation that
// returns its record entity, and checks every @idempotent mutation against
// the ent package (found among gqlgen's autobind packages).
//
// # Mistakes reported at generation time
//
// What the hook would otherwise meet at server start or at the first
// request fails go generate, with one message that names the fix:
//
//   - ent's step: a record entity without the archive entity, a scope field
//     that is missing, optional or not a string, an unknown mode, a create
//     mutation on an entity entgql skips, two fields with one GraphQL name,
//     an idemschema.FingerprintExclude path that is not in the create
//     input, a storage other than SQL;
//   - gqlgen's step: @idempotent outside Mutation or without the key
//     argument; keyRequired: false on a key declared String!; a
//     fingerprintExclude path that is not among the mutation's arguments
//     (named, with what is missing); a retentionSeconds that is not
//     positive; no record:
//     and no IdempotencyRecord entity; a record entity without the mixin or
//     unknown to ent; an argument that sets a field of the record entity
//     but whose Go type is not the field's (or a pointer to it); two
//     arguments for one field.
//
// A column type given for one dialect only (field.SchemaType) is the
// application's own: ent uses its default type on the other dialects, and
// fails there at migration ("unsupported type") for a field.Other, which
// has none. Give such fields a type for every dialect they run on.
//
// # Rolling keys out to existing clients
//
// Making an existing create mutation idempotent would break every client
// that does not send a key yet. The rollout, ending with the key required:
//
//  1. Add the mixin with idemschema.KeyOptional() in the entity's
//     annotations (or generate with WithKeyOptional() for every entity).
//     The generated mutation takes idempotencyKey: String and is marked
//     @idempotent(record: "<T>", keyRequired: false). A call without a key
//     runs as the mutation did before: its row is inserted without
//     idempotency state, in one transaction with the resolver's writes;
//     nothing is claimed or stored, and a retry runs it again. The hook
//     counts such calls (the idem.keyless metric, by field) and logs them.
//     Calls with a key are retry-safe at once.
//  2. Move the clients to keys; watch idem.keyless fall to zero.
//  3. Require the key: remove KeyOptional (the argument becomes String!)
//     and run go generate. For a hand-written mutation, remove
//     keyRequired: false: a call without a key then gets
//     IDEMPOTENCY_KEY_MISSING (or, with String!, a GraphQL validation
//     error).
//
// An application that keeps a create<T> of its own (generating one too
// would fail: "can only be defined once") generates none for the entity,
// with idemschema.NoCreateMutation(), and opts its own in, with the key
// argument and the same rollout:
//
//	createCategory(idempotencyKey: String, input: CreateCategoryInput!): Category!
//		@idempotent(record: "Category", keyRequired: false)
//
// Its resolver then starts from the row the claim inserted,
// ent.ClaimedCategory(ctx), instead of creating one. A mutation whose
// result is not a row of its own keeps its records in IdempotencyRecord
// (no record: argument) and writes through ent.FromContext(ctx), the
// transaction's client, so that its writes commit with its result.
package idemgen
