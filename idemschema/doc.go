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
// Atomic, Lease, Retention, FingerprintExclude, KeyOptional and
// NoCreateMutation are
// annotations that configure the entity's records and its generated
// mutation (KeyOptional and NoCreateMutation serve the rollout of keys to
// existing clients: see idemgen):
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
// # Tenant isolation
//
// The scope is the key's namespace; with Mixin{Isolate: true} it is also a
// row filter, so that entgql's node(id), nodes(ids) and edge arguments are
// safe to expose:
//
//	func (Todo) Mixin() []ent.Mixin {
//		return []ent.Mixin{idemschema.Mixin{Isolate: true}}
//	}
//
// For such an entity:
//
//   - queries (edge traversals included) return the rows of the tenant in
//     the context only;
//   - updates and deletes reach only that tenant's rows (another tenant's
//     row is not found);
//   - a new row gets the tenant, and may not be created for another;
//   - a row may link only to rows of its own tenant, of isolated entities:
//     a link to another tenant's row fails as a link to a row that does not
//     exist (a constraint error), so that no tenant learns whether another
//     tenant's id exists. Links to entities without isolation are not
//     checked, nor links made from their side.
//
// The hook puts the tenant (idem.Config.Tenant) into the context of every
// GraphQL operation, queries included. Code outside a GraphQL request sets
// it with idem.WithTenant, or uses AllTenants when it serves every tenant
// (a job folding events, an operator's tool). A context with neither fails
// with ErrNoTenant instead of reading every tenant's rows.
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
