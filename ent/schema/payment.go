package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/goovo/idem/idemschema"
)

// Payment is the article's payment_requests row: the intent to charge an
// order, the claim on its idempotency key, and the ledger entry, in one row.
type Payment struct {
	ent.Schema
}

// Mixin of the Payment.
func (Payment) Mixin() []ent.Mixin {
	return []ent.Mixin{idemschema.Mixin{}}
}

// Fields of the Payment.
func (Payment) Fields() []ent.Field {
	return []ent.Field{
		field.Int("amount").Comment("Amount charged, in minor units."),
		field.String("provider_charge_id").Optional().
			Comment("The payment provider's id of the charge.").
			Annotations(entgql.Skip(entgql.SkipMutationCreateInput, entgql.SkipMutationUpdateInput)),
		field.Int("refunded_amount").Default(0).NonNegative().
			Comment("Sum of the refunds of this payment, in minor units.").
			Annotations(entgql.Skip(entgql.SkipMutationCreateInput, entgql.SkipMutationUpdateInput)),
	}
}

// Edges of the Payment.
func (Payment) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("order", Order.Type).Ref("payments").Unique().Required(),
		edge.To("refunds", Refund.Type).
			Annotations(entgql.Skip(entgql.SkipMutationCreateInput, entgql.SkipMutationUpdateInput)),
	}
}
