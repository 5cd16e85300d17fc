package idemschema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
)

// Record is a ready-made ent schema for the records of hand-written
// @idempotent mutations whose results are not a row of their own (approve,
// transfer, increment). Add it to an ent schema package in one line, and the
// directive's default record entity, IdempotencyRecord, exists:
//
//	// ent/schema/idempotencyrecord.go
//	type IdempotencyRecord struct{ idemschema.Record }
//
// It has the mixin's fields only, no GraphQL type and no create mutation.
type Record struct {
	ent.Schema
}

// Mixin of the Record.
func (Record) Mixin() []ent.Mixin { return []ent.Mixin{Mixin{}} }

// Annotations of the Record.
func (Record) Annotations() []schema.Annotation {
	return []schema.Annotation{NoCreateMutation(), entgql.Skip(entgql.SkipAll)}
}
