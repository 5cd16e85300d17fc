package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/goovo/idem/idemschema"
)

// PageView is one view of a page: the article's answer to a counter that
// must not count a retry twice. Instead of count = count + 1, each view is
// an event inserted with ON CONFLICT DO NOTHING on its idempotency key (the
// claim of recordPageView), and a materializer folds events into
// PageViewCount exactly once.
type PageView struct {
	ent.Schema
}

// Mixin of the PageView.
func (PageView) Mixin() []ent.Mixin {
	return []ent.Mixin{idemschema.Mixin{}}
}

// Fields of the PageView.
func (PageView) Fields() []ent.Field {
	return []ent.Field{
		field.String("page").NotEmpty().MaxLen(2048).Immutable(),
		field.Bool("folded").Default(false).
			Comment("Counted into PageViewCount, in the same transaction that set it."),
	}
}

// Indexes of the PageView.
func (PageView) Indexes() []ent.Index {
	return []ent.Index{index.Fields("folded")}
}

// Annotations of the PageView.
func (PageView) Annotations() []schema.Annotation {
	return []schema.Annotation{idemschema.NoCreateMutation(), entgql.Skip(entgql.SkipAll)}
}

// PageViewCount is the materialized count of a tenant's page.
type PageViewCount struct {
	ent.Schema
}

// Fields of the PageViewCount.
func (PageViewCount) Fields() []ent.Field {
	return []ent.Field{
		field.String("tenant_id").NotEmpty().Immutable(),
		field.String("page").NotEmpty().Immutable(),
		field.Int("count").Default(0).NonNegative(),
	}
}

// Indexes of the PageViewCount.
func (PageViewCount) Indexes() []ent.Index {
	return []ent.Index{index.Fields("tenant_id", "page").Unique()}
}

// Annotations of the PageViewCount.
func (PageViewCount) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}
