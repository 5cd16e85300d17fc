// Package schema is a test schema unrelated to the example application: it
// checks that the mixin and the generator work on any entity, here one
// with UUID ids, a tenant field of its own reused as the scope, and atomic
// mode.
package schema

import (
	"time"

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
		field.Time("created_at").Default(time.Now).Immutable(),
	}
}

// Annotations of the Shipment: createShipment runs in atomic mode.
func (Shipment) Annotations() []schema.Annotation {
	return []schema.Annotation{idemschema.Atomic()}
}
