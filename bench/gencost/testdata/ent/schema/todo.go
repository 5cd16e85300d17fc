// Package schema is the generation-cost fixture: entgql's todo example,
// reduced, with UUID ids, MapsTo, Skip, an enum, JSON and edges. Lines
// marked //IDEM are uncommented in the variant with the library and
// removed in the plain one.
package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"github.com/google/uuid"
	//IDEM "github.com/goovo/idem/idemschema"
)

// Todo is a task.
type Todo struct{ ent.Schema }

//IDEM func (Todo) Mixin() []ent.Mixin { return []ent.Mixin{idemschema.Mixin{}} }

// Fields of the Todo.
func (Todo) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("id", uuid.UUID{}).Default(uuid.New),
		field.Time("created_at").Default(time.Now).Immutable().
			Annotations(entgql.Skip(entgql.SkipMutationCreateInput)),
		field.Enum("status").NamedValues("InProgress", "IN_PROGRESS", "Completed", "COMPLETED").Default("IN_PROGRESS"),
		field.Int("priority").Default(0).Annotations(entgql.MapsTo("priorityOrder")),
		field.Text("text").NotEmpty(),
		field.Bytes("blob").Optional().Annotations(entgql.Skip()),
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
	return []schema.Annotation{entgql.QueryField(), entgql.Mutations(entgql.MutationCreate())}
}

// Category groups todos.
type Category struct{ ent.Schema }

//IDEM func (Category) Mixin() []ent.Mixin { return []ent.Mixin{idemschema.Mixin{}} }

// Fields of the Category.
func (Category) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("id", uuid.UUID{}).Default(uuid.New),
		field.Text("text").NotEmpty(),
	}
}

// Edges of the Category.
func (Category) Edges() []ent.Edge {
	return []ent.Edge{edge.To("todos", Todo.Type)}
}

// Annotations of the Category.
func (Category) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.QueryField(), entgql.Mutations(entgql.MutationCreate())}
}

// User owns nothing here; it has no mixin.
type User struct{ ent.Schema }

// Fields of the User.
func (User) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("id", uuid.UUID{}).Default(uuid.New),
		field.String("name").Default("Anonymous"),
		field.JSON("metadata", map[string]any{}).Optional(),
	}
}

// Annotations of the User.
func (User) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.QueryField()}
}

//IDEM // IdempotencyRecord holds the records of hand-written mutations.
//IDEM type IdempotencyRecord struct{ idemschema.Record }

//IDEM // IdempotencyArchive is the sweeper's archive.
//IDEM type IdempotencyArchive struct{ idemschema.Archive }
