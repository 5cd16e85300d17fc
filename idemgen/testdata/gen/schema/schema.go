// Package schema is the schema of the generation tests: a module generated
// from it in a temporary directory is run through gqlgen with hand-written
// mutations, correct and mistaken.
package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"github.com/google/uuid"

	"github.com/goovo/idem/idemschema"
)

// Todo is a record entity with UUID ids, a renamed and a skipped field.
type Todo struct{ ent.Schema }

func (Todo) Mixin() []ent.Mixin { return []ent.Mixin{idemschema.Mixin{}} }

func (Todo) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("id", uuid.UUID{}).Default(uuid.New),
		field.Text("text").NotEmpty(),
		field.Int("priority").Default(0).Annotations(entgql.MapsTo("priorityOrder")),
		field.Time("created_at").Default(time.Now).Immutable().
			Annotations(entgql.Skip(entgql.SkipMutationCreateInput)),
	}
}

func (Todo) Edges() []ent.Edge {
	return []ent.Edge{edge.From("owner", Widget.Type).Ref("todos").Unique()}
}

// Widget has no mixin.
type Widget struct{ ent.Schema }

func (Widget) Fields() []ent.Field {
	return []ent.Field{field.UUID("id", uuid.UUID{}).Default(uuid.New), field.String("name")}
}

func (Widget) Edges() []ent.Edge { return []ent.Edge{edge.To("todos", Todo.Type)} }

// IdempotencyArchive is the archive; there is no IdempotencyRecord.
type IdempotencyArchive struct{ idemschema.Archive }
