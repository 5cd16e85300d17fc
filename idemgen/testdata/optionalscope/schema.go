// Package optionalscope scopes keys by an optional field.
package optionalscope

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/goovo/idem/idemschema"
)

type Ticket struct{ ent.Schema }

func (Ticket) Mixin() []ent.Mixin { return []ent.Mixin{idemschema.Mixin{Scope: "org"}} }
func (Ticket) Fields() []ent.Field {
	return []ent.Field{field.String("org").Optional()}
}
