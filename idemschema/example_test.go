package idemschema_test

import (
	"fmt"

	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"

	"github.com/goovo/idem/idemschema"
)

// Booking already has a tenant field, org_id: the mixin scopes keys with it
// instead of adding tenant_id, and its create mutation runs in atomic mode.
type Booking struct {
	ent.Schema
}

func (Booking) Fields() []ent.Field {
	return []ent.Field{field.String("org_id").Immutable(), field.Time("starts_at")}
}

func (Booking) Mixin() []ent.Mixin {
	return []ent.Mixin{idemschema.Mixin{Scope: "org_id"}}
}

func (Booking) Annotations() []schema.Annotation {
	return []schema.Annotation{idemschema.Atomic()}
}

func ExampleMixin() {
	m := Booking{}.Mixin()[0]
	for _, f := range m.Fields()[:3] {
		fmt.Println(f.Descriptor().Name)
	}
	fmt.Println(m.Indexes()[0].Descriptor().Fields)
	// Output:
	// idempotency_key
	// idempotency_status
	// idempotency_fingerprint
	// [org_id idempotency_key]
}

// Isolate makes the scope a row filter: the mixin adds a hook that holds
// every mutation to the context's tenant (next to the hook every mixin has,
// which refuses a second row of a claim's entity), and tells idemgen to generate
// the check of the entity's links.
func ExampleMixin_isolate() {
	m := idemschema.Mixin{Isolate: true}
	ant := m.Annotations()[0].(idemschema.Annotation)
	fmt.Println(ant.ScopeField, ant.Isolate, len(m.Hooks()))
	// Output: tenant_id true 2
}
