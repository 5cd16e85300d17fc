package idemschema

import (
	"encoding/json"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/goovo/idem/internal/record"
)

// Archive is the ready-made ent schema of the cold table the sweeper moves
// responses to once their retention window has passed. One archive serves
// every record table of an ent package. Add it in one line:
//
//	// ent/schema/idempotencyarchive.go
//	type IdempotencyArchive struct{ idemschema.Archive }
//
// The sweeper never deletes archived rows: they are the history of what
// each key answered.
type Archive struct {
	ent.Schema
}

// Fields of the Archive: what the record held, and where it came from.
func (Archive) Fields() []ent.Field {
	return []ent.Field{
		field.String(record.ArchiveTable).Immutable().Comment("Table the record was archived from."),
		field.String(record.ArchiveTenant).Immutable(),
		field.String(FieldKey).Immutable(),
		field.String(FieldStatus).Immutable(),
		field.String(FieldFingerprint).Immutable(),
		field.Bytes(FieldResponse).Optional().Immutable().SchemaType(mysqlBytes),
		field.Int(FieldAttempt).Immutable(),
		field.Time(FieldClaimedAt).Optional().Nillable().Immutable().SchemaType(mysqlTime),
		field.Time(FieldCompletedAt).Immutable().SchemaType(mysqlTime),
		field.Time(FieldArchivedAt).Immutable().SchemaType(mysqlTime),
	}
}

// Indexes of the Archive. A record is archived once: a key may be claimed
// again only after its tombstone was purged, with a new claim time.
func (Archive) Indexes() []ent.Index {
	return []ent.Index{
		// A short name of its own: ent would hash the long default one to
		// fit PostgreSQL's 63 characters, and SQLite's schema inspection
		// then misses it.
		index.Fields(record.ArchiveTable, record.ArchiveTenant, FieldKey, FieldClaimedAt).Unique().StorageKey(record.ArchiveIndex),
	}
}

// Annotations of the Archive: found by the generator, invisible to GraphQL.
func (Archive) Annotations() []schema.Annotation {
	return []schema.Annotation{ArchiveAnnotation{}, entgql.Skip(entgql.SkipAll)}
}

// ArchiveAnnotation marks the archive schema for the code generator.
type ArchiveAnnotation struct {
	Archive bool `json:"archive"`
}

// Name implements schema.Annotation.
func (ArchiveAnnotation) Name() string { return "IdempotencyArchive" }

// Decode decodes the annotation as stored in the generator's graph.
func (a *ArchiveAnnotation) Decode(v any) error {
	buf, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(buf, a)
}
