package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/goovo/idem/idemschema"
)

// Refund gives back part of a payment. It is the record of the hand-written
// refundPayment mutation: the claim inserts it from the mutation's
// arguments of the same names (paymentID, amount).
type Refund struct {
	ent.Schema
}

// Mixin of the Refund.
func (Refund) Mixin() []ent.Mixin {
	return []ent.Mixin{idemschema.Mixin{}}
}

// Fields of the Refund.
func (Refund) Fields() []ent.Field {
	return []ent.Field{
		field.Int("amount").Comment("Amount refunded, in minor units."),
		field.Int("payment_id").Immutable(),
	}
}

// Edges of the Refund.
func (Refund) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("payment", Payment.Type).Ref("refunds").Field("payment_id").Unique().Required().Immutable(),
	}
}

// Annotations of the Refund: no generated createRefund; refunds are made by
// refundPayment.
func (Refund) Annotations() []schema.Annotation {
	return []schema.Annotation{idemschema.NoCreateMutation()}
}
