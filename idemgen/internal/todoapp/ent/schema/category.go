package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"github.com/google/uuid"

	"github.com/goovo/idem/idemschema"
)

// Category groups a tenant's todos. The application had its own
// createCategory before it adopted idempotency keys, and keeps it: no
// generated mutation, and the hand-written one opts in with @idempotent
// while its key is optional (graph/todo.graphql).
type Category struct {
	ent.Schema
}

// Mixin of the Category: its rows are isolated by tenant.
func (Category) Mixin() []ent.Mixin {
	return []ent.Mixin{idemschema.Mixin{Isolate: true}}
}

// Fields of the Category.
func (Category) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("id", uuid.UUID{}).Default(uuid.New),
		field.Text("text").NotEmpty(),
		// A column type for PostgreSQL only: SQLite takes ent's default for
		// a string. (A field.Other needs a type for every dialect it runs on.)
		field.String("color").Optional().
			SchemaType(map[string]string{dialect.Postgres: "varchar(16)"}),
	}
}

// Edges of the Category.
func (Category) Edges() []ent.Edge {
	return []ent.Edge{edge.To("todos", Todo.Type)}
}

// Annotations of the Category.
func (Category) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.QueryField(),
		entgql.Mutations(entgql.MutationCreate()),
		idemschema.NoCreateMutation(),
	}
}
