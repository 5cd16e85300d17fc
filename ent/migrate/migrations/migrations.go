// Package migrations holds the versioned PostgreSQL migrations of the
// example's ent schema: <version>_<name>.sql files, applied in version order,
// and atlas.sum, their checksum. They are written by
// "go run ./cmd/migrate diff <name>" (or by hand, see "migrate new") and
// never edited once they may have run anywhere.
//
// FS embeds them, so that the migrate binary carries the migrations of the
// code it was built with.
package migrations

import "embed"

// FS holds the migration files and atlas.sum.
//
//go:embed *.sql atlas.sum
var FS embed.FS
