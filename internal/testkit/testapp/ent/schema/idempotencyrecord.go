package schema

import "github.com/goovo/idem/idemschema"

// IdempotencyRecord holds the records of hand-written @idempotent mutations
// that name no record entity: the framework's ready-made schema.
type IdempotencyRecord struct{ idemschema.Record }
