// Package noarchive has a record entity and no archive entity.
package noarchive

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"

	"github.com/goovo/idem/idemschema"
)

type Ticket struct{ ent.Schema }

func (Ticket) Mixin() []ent.Mixin  { return []ent.Mixin{idemschema.Mixin{}} }
func (Ticket) Fields() []ent.Field { return []ent.Field{field.String("title")} }
