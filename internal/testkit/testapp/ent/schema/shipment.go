// Package schema is a test schema unrelated to the example application: it
// checks that the mixin and the generator work on any entity, here one
// with UUID ids and a tenant field of its own reused as the scope, and it is
// the bench on which the tests of leases, takeovers and failures run.
package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"github.com/google/uuid"

	"github.com/goovo/idem/idemschema"
)

// Shipment is a parcel sent for an organisation.
type Shipment struct {
	ent.Schema
}

// Mixin of the Shipment: its own "org" field scopes the keys.
func (Shipment) Mixin() []ent.Mixin {
	return []ent.Mixin{idemschema.Mixin{Scope: "org"}}
}

// Fields of the Shipment.
func (Shipment) Fields() []ent.Field {
	return []ent.Field{
		field.UUID("id", uuid.UUID{}).Default(uuid.New),
		field.String("org").NotEmpty().Immutable(),
		field.String("destination").NotEmpty(),
		field.Int("weight_grams").Positive(),
		field.String("label").Optional().
			Comment("Written by the resolver after the claim: the business write of a test.").
			Annotations(entgql.Skip(entgql.SkipMutationCreateInput, entgql.SkipMutationUpdateInput)),
		field.Time("created_at").Default(time.Now).Immutable(),
	}
}

// Annotations of the Shipment: a short lease, so that a test can tell the
// mutation's lease from the hook's default.
func (Shipment) Annotations() []schema.Annotation {
	return []schema.Annotation{idemschema.Lease(10 * time.Second)}
}
