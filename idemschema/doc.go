// Package idemschema holds the ent side of the framework: the mixin that
// makes an entity its own idempotency record, and ready-made schemas for the
// general-purpose record table and the archive.
//
// # The mixin
//
// Mixin adds the scope (tenant_id, or a field the entity has, with
// Mixin{Scope: "org_id"}), the key, status, stored response, fingerprint,
// lease deadline, attempt counter and times, the unique index on
// (scope, idempotency_key) that decides who owns a key, and partial indexes
// for the sweeper. Its annotation tells idemgen to generate the record glue
// and a create mutation:
//
//	func (Payment) Mixin() []ent.Mixin {
//		return []ent.Mixin{idemschema.Mixin{}}
//	}
//
// Atomic, Lease, Retention and NoCreateMutation are annotations that
// configure the entity's records and its generated mutation:
//
//	func (Order) Annotations() []schema.Annotation {
//		return []schema.Annotation{idemschema.Atomic(), idemschema.Retention(48 * time.Hour)}
//	}
//
// Rows whose claim is pending or failed are hidden from ent queries
// (IncludeUnfinished shows them): they are claims, not business facts.
// Import the ent package's runtime package, as for any ent schema with
// hooks or interceptors.
//
// # Ready-made schemas
//
// Record is the default home of the records of hand-written @idempotent
// mutations; Archive is the cold table the sweeper moves expired responses
// to. Each is added to an ent schema package in one line:
//
//	type IdempotencyRecord struct{ idemschema.Record }
//	type IdempotencyArchive struct{ idemschema.Archive }
package idemschema
