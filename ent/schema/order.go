// Package schema holds the ent schemas of the example application: orders
// and the payments that pay them, each its own idempotency record.
package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/goovo/idem/idemschema"
)

// Order is something a customer owes. createOrder is retry-safe: a client
// that times out and retries gets the same order, not a second one. Its
// effects live in this database only, so it runs in atomic mode: one
// transaction, and a concurrent duplicate waits and replays.
type Order struct {
	ent.Schema
}

// Mixin of the Order.
func (Order) Mixin() []ent.Mixin {
	return []ent.Mixin{idemschema.Mixin{}}
}

// Fields of the Order.
func (Order) Fields() []ent.Field {
	return []ent.Field{
		field.Int("amount").Comment("Amount in minor units (cents)."),
		field.String("currency").Comment("ISO 4217 code, e.g. EUR."),
		field.Bool("paid").Default(false).
			Comment("Set by the first successful payment.").
			Annotations(entgql.Skip(entgql.SkipMutationCreateInput, entgql.SkipMutationUpdateInput)),
	}
}

// Annotations of the Order.
func (Order) Annotations() []schema.Annotation {
	return []schema.Annotation{idemschema.Atomic()}
}

// Edges of the Order.
func (Order) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("payments", Payment.Type).
			Annotations(entgql.Skip(entgql.SkipMutationCreateInput, entgql.SkipMutationUpdateInput)),
	}
}
