// Package schema is the ent schema of the app that internal/readmepath
// builds from the README: what a user's schema may hold (UUID ids,
// entgql.MapsTo, entgql.Skip, an enum, a JSON field, an edge, a column type
// for one dialect), with the README's mixin.
package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"github.com/google/uuid"

	"github.com/goovo/idem/idemschema"
)

// Book is a tenant's book. Its generated createBook mutation is retry-safe.
type Book struct{ ent.Schema }

// Mixin of the Book, as the README shows it.
func (Book) Mixin() []ent.Mixin {
	return []ent.Mixin{idemschema.Mixin{Isolate: true}}
}

// Fields of the Book.
func (Book) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("id", uuid.UUID{}).Default(uuid.New),
		field.String("title").NotEmpty().
			Annotations(entgql.MapsTo("headline")),
		field.Enum("format").Values("HARDCOVER", "PAPERBACK", "EBOOK").Default("PAPERBACK"),
		field.JSON("tags", []string{}).Optional(),
		// smallint on PostgreSQL, ent's default integer type elsewhere.
		field.Int("pages").Default(0).
			SchemaType(map[string]string{dialect.Postgres: "smallint"}),
		field.Time("added_at").Default(time.Now).Immutable().
			Annotations(entgql.Skip(entgql.SkipMutationCreateInput)),
		field.String("internal_note").Optional().
			Annotations(entgql.Skip()),
		field.UUID("author_id", uuid.UUID{}).Optional(),
	}
}

// Edges of the Book.
func (Book) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("author", Author.Type).Ref("books").Field("author_id").Unique(),
	}
}

// Annotations of the Book.
func (Book) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.QueryField(), entgql.Mutations(entgql.MutationCreate())}
}
