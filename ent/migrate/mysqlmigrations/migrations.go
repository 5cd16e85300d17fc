// Package mysqlmigrations holds the versioned MySQL and MariaDB migrations
// of the example's ent schema, generated for ent's mysql dialect:
// <version>_<name>.sql files, applied in version order, and atlas.sum,
// their checksum. They are written by
// "go run ./cmd/migrate diff -dialect mysql <name>" (or by hand, see
// "migrate new") and never edited once they may have run anywhere. The
// PostgreSQL migrations of the same schema are in package migrations.
//
// FS embeds them, so that the migrate binary carries the migrations of the
// code it was built with.
package mysqlmigrations

import "embed"

// FS holds the migration files and atlas.sum.
//
//go:embed *.sql atlas.sum
var FS embed.FS
