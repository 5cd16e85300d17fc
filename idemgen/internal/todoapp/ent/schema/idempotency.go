package schema

import "github.com/goovo/idem/idemschema"

// IdempotencyRecord holds the records of hand-written @idempotent mutations
// that name no entity of their own.
type IdempotencyRecord struct{ idemschema.Record }

// IdempotencyArchive is where the sweeper moves expired responses.
type IdempotencyArchive struct{ idemschema.Archive }
