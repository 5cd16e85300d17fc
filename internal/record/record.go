// Package record is the one source of the facts every layer shares about
// an idempotency record: the columns the mixin adds, the states a record
// goes through, and the predicates of the mixin's partial indexes. The
// schema (idemschema), the store's SQL (internal/store) and the hook (idem)
// take them from here; it imports nothing but the standard library, so
// that any of them can.
package record

import "time"

// Columns of a record table. They are fixed, so that one store serves every
// table with the mixin; only the scope column may be renamed (Scope).
const (
	// DefaultScope is the scope (tenant) column the mixin adds when the
	// entity names none of its own.
	DefaultScope = "tenant_id"
	Key          = "idempotency_key"
	Status       = "idempotency_status"
	Fingerprint  = "idempotency_fingerprint"
	Response     = "idempotency_response"
	Attempt      = "idempotency_attempt"
	// LeaseExpiresAt is, while the record is pending, when its attempt's
	// lease ends; once it is finished, until when its result replays (the
	// expiresAt its answer promised): a finished record holds its key
	// until then, and no sweeper archives it sooner.
	LeaseExpiresAt = "idempotency_lease_expires_at"
	ClaimedAt      = "idempotency_claimed_at"
	CompletedAt    = "idempotency_completed_at"
	ArchivedAt     = "idempotency_archived_at"
	// Operation is what the recoverer needs to run a claim again when its
	// client never comes back: the field's operation and variables (JSON,
	// see MaxOperationBytes); NULL when the mutation opted out of recovery
	// or the operation was too large to keep.
	Operation = "idempotency_operation"
)

// Columns lists every column above but the scope, in the order of the
// mixin's fields.
var Columns = []string{Key, Status, Fingerprint, Response, Attempt, LeaseExpiresAt, ClaimedAt, CompletedAt, ArchivedAt, Operation}

// MaxKeyLength is the longest idempotency key, in bytes: the key column's
// length, and the limit the hook checks before any database work.
const MaxKeyLength = 255

// MaxOperationBytes bounds the operation a claim keeps for the recoverer
// (Operation); a larger one is not kept, and its claim is not recovered.
const MaxOperationBytes = 64 << 10

// Archive columns: the archive table holds what a record held, and the
// table it came from, under a fixed tenant column.
const (
	ArchiveTable  = "record_table"
	ArchiveTenant = "tenant_id"
	// ArchiveIndex is the archive's unique index: a record is archived
	// once; a key may be claimed again only after its tombstone was purged,
	// with a new claim time.
	ArchiveIndex = "idempotency_archive_record"
)

// States of a record, as stored in Status. A claim inserts a pending
// record; it ends succeeded or failed.
const (
	StatusPending   = "pending"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Finished reports whether status is a final state: the record holds a
// result that retries replay.
func Finished(status string) bool { return status == StatusSucceeded || status == StatusFailed }

// The predicates of the mixin's partial indexes, written as PostgreSQL
// prints them back (parenthesised, no casts), so that ent's automatic
// migration finds nothing to change on a second run, and as SQLite also
// reads them. The store's batch statements select rows with them, so that
// the planner uses the index and their cost follows the rows they move.
const (
	// ToArchive: finished records that still hold their response.
	ToArchive = "(" + CompletedAt + " IS NOT NULL) AND (" + ArchivedAt + " IS NULL)"
	// Tombstone: records whose response the sweeper moved to the archive.
	Tombstone = "(" + ArchivedAt + " IS NOT NULL)"
	// Pending: claims that were made and not completed.
	Pending = "(" + ClaimedAt + " IS NOT NULL) AND (" + CompletedAt + " IS NULL)"
)

// Record is the idempotency state of one (scope, key), as the store reads
// it and the protocol decides on it.
type Record struct {
	Status      string
	Fingerprint string
	Response    []byte
	Attempt     int
	// LeaseExpiresAt: the lease while pending, the promised expiry once
	// finished (see the column's doc).
	LeaseExpiresAt time.Time
	ClaimedAt      time.Time
	CompletedAt    time.Time
	// ArchivedAt is set once the sweeper moved the response to the archive:
	// the record is a tombstone.
	ArchivedAt time.Time
}
