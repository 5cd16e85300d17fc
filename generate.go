package idem

// The example application's generated code: ent (with idemgen and entgql),
// then gqlgen (with idemgen's plugin), by the library's one generation
// program. -key-header: clients may send the key in the Idempotency-Key
// header instead of the argument, so the generated idempotencyKey
// arguments are optional. -relay=false: no node(id) query, which would
// read across tenants, since the example's entities are not isolated
// (idemschema.Mixin{Isolate: true} would make it safe: see
// idemgen/internal/todoapp). sql/lock: the page-view materializer locks the
// events it folds.
//go:generate go run ./idemgen/cmd/idemgen -key-header -relay=false -features sql/lock
