package schema

import "github.com/goovo/idem/idemschema"

// IdempotencyArchive is the cold table the sweeper moves expired responses
// to: the framework's ready-made schema.
type IdempotencyArchive struct{ idemschema.Archive }
