package schema

import (
	"context"
	"errors"

	"entgo.io/ent"

	"github.com/goovo/idem"
	gen "github.com/goovo/idem/ent"
	"github.com/goovo/idem/ent/hook"
	"github.com/goovo/idem/ent/order"
	"github.com/goovo/idem/ent/payment"
	"github.com/goovo/idem/idemschema"
)

// A row that refers to another tenant's row is refused at the claim with
// the very answer a reference to no row gets from the foreign key, so that a
// tenant cannot tell another tenant's ids from ids that do not exist (an
// existence oracle): the foreign keys of SQLite and of a plain PostgreSQL
// schema carry the id only. (idemdb.PartitionByTenant's composite foreign
// keys refuse both themselves.) A reference to no row is left to the foreign
// key; the message is the generated claim's for a broken constraint.

// errOtherTenant is the reason logged with the refusal, never shown.
var errOtherTenant = errors.New("the referred row belongs to another tenant")

func refersToNothing(entity string) error {
	return idem.InvalidInput("the input breaks a constraint of "+entity+" (does every record it refers to exist?)", errOtherTenant)
}

// Hooks of the Payment: its order may not be another tenant's.
func (Payment) Hooks() []ent.Hook {
	return []ent.Hook{hook.On(func(next ent.Mutator) ent.Mutator {
		return hook.PaymentFunc(func(ctx context.Context, m *gen.PaymentMutation) (ent.Value, error) {
			tenant, _ := m.TenantID()
			if id, ok := m.OrderID(); ok {
				foreign, err := m.Client().Order.Query().Where(order.ID(id), order.TenantIDNEQ(tenant)).Exist(idemschema.IncludeUnfinished(ctx))
				if err != nil {
					return nil, err
				}
				if foreign {
					return nil, refersToNothing("Payment")
				}
			}
			return next.Mutate(ctx, m)
		})
	}, ent.OpCreate)}
}

// Hooks of the Refund: its payment may not be another tenant's.
func (Refund) Hooks() []ent.Hook {
	return []ent.Hook{hook.On(func(next ent.Mutator) ent.Mutator {
		return hook.RefundFunc(func(ctx context.Context, m *gen.RefundMutation) (ent.Value, error) {
			tenant, _ := m.TenantID()
			if id, ok := m.PaymentID(); ok {
				foreign, err := m.Client().Payment.Query().Where(payment.ID(id), payment.TenantIDNEQ(tenant)).Exist(idemschema.IncludeUnfinished(ctx))
				if err != nil {
					return nil, err
				}
				if foreign {
					return nil, refersToNothing("Refund")
				}
			}
			return next.Mutate(ctx, m)
		})
	}, ent.OpCreate)}
}
