// Package schema is the todo application's ent schema, after entgql's todo
// example.
package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"github.com/google/uuid"

	"github.com/goovo/idem/idemschema"
)

// Todo is a task of a tenant, with subtasks, in a category. Its generated
// createTodo mutation is retry-safe.
type Todo struct {
	ent.Schema
}

// Mixin of the Todo: its rows are isolated by tenant.
func (Todo) Mixin() []ent.Mixin {
	return []ent.Mixin{idemschema.Mixin{Isolate: true}}
}

// Fields of the Todo.
func (Todo) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("id", uuid.UUID{}).Default(uuid.New),
		field.Time("created_at").Default(time.Now).Immutable().
			Annotations(entgql.Skip(entgql.SkipMutationCreateInput)),
		field.Enum("status").
			NamedValues("InProgress", "IN_PROGRESS", "Completed", "COMPLETED").
			Default("IN_PROGRESS"),
		field.Int("priority").Default(0).
			Annotations(entgql.MapsTo("priorityOrder")),
		field.Text("text").NotEmpty(),
		field.Bytes("blob").Optional().
			Annotations(entgql.Skip()),
		field.JSON("labels", []string{}).Optional(),
		field.UUID("category_id", uuid.UUID{}).Optional().Immutable(),
	}
}

// Edges of the Todo.
func (Todo) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("children", Todo.Type).From("parent").Unique(),
		edge.From("category", Category.Type).Ref("todos").Field("category_id").Unique().Immutable(),
	}
}

// Annotations of the Todo.
func (Todo) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.QueryField()}
}
