package idemschema

import (
	"context"
	"errors"
	"fmt"

	"entgo.io/ent"
	"entgo.io/ent/dialect/sql"

	"github.com/goovo/idem/internal/tenancy"
)

// ErrNoTenant is the error of a query, update or delete of an isolated
// entity (Mixin{Isolate: true}) whose context carries no tenant: rather than
// read or change every tenant's rows, it fails. GraphQL requests get the
// tenant from the hook (idem.Config.Tenant); other code calls
// idem.WithTenant, or AllTenants when it must see every tenant.
var ErrNoTenant = errors.New("idemschema: no tenant in the context of a query of an isolated entity (idem.WithTenant, or idemschema.AllTenants for code that serves every tenant)")

// errNotGenerated: the ent package was generated without idemgen, which
// writes the methods isolation needs.
var errNotGenerated = errors.New("idemschema: isolation needs the ent code generated with idemgen.NewExtension")

// AllTenants returns a context in which isolated entities are not filtered
// by tenant: for trusted code that serves every tenant (a job folding
// events, an operator's tool, a test's assertions). Rows created in it must
// set their scope field themselves.
func AllTenants(ctx context.Context) context.Context {
	return tenancy.WithAllTenants(ctx)
}

// Hooks of the mixin: inside an idempotent mutation whose claim inserted a
// row of the entity, every other create of the entity is refused (see
// ErrSecondRow); with Isolate, every mutation of the entity is held to the
// context's tenant.
func (m Mixin) Hooks() []ent.Hook {
	hooks := []ent.Hook{func(next ent.Mutator) ent.Mutator {
		return ent.MutateFunc(func(ctx context.Context, mu ent.Mutation) (ent.Value, error) {
			if err := oneRow(ctx, mu); err != nil {
				return nil, err
			}
			return next.Mutate(ctx, mu)
		})
	}}
	if !m.Isolate {
		return hooks
	}
	scope := m.ScopeField()
	return append(hooks, func(next ent.Mutator) ent.Mutator {
		return ent.MutateFunc(func(ctx context.Context, mu ent.Mutation) (ent.Value, error) {
			if err := isolate(ctx, scope, mu); err != nil {
				return nil, err
			}
			return next.Mutate(ctx, mu)
		})
	})
}

// ErrSecondRow is the error of a create of an entity inside an idempotent
// mutation whose claim already inserted a row of that entity, the
// mutation's one row: typically a resolver that kept its old body
// (r.client.T.Create().SetInput(input).Save(ctx)) when the mutation became
// idempotent. The create never reaches the database (it would leave two
// rows per key), and the hook refuses the whole mutation, whatever the
// resolver does with the error: the client gets INTERNAL_SERVER_ERROR, the
// key is released, and the log names the resolver. The fix is to return
// the claimed row, ent.Claimed<T>(ctx), and change it as needed.
var ErrSecondRow = errors.New("idemschema: this idempotent mutation's claim already inserted its row; return ent.Claimed<T>(ctx) instead of creating another")

// oneRow refuses a create of the entity whose row the claim in ctx
// inserted, other than that insert itself.
func oneRow(ctx context.Context, mu ent.Mutation) error {
	if !mu.Op().Is(ent.OpCreate) || tenancy.IsClaimInsert(ctx) {
		return nil
	}
	c, ok := tenancy.ClaimOf(ctx)
	if !ok || c.Entity != mu.Type() {
		return nil
	}
	if c.SecondRow != nil {
		c.SecondRow.Store(true)
	}
	return fmt.Errorf("%w (a second %s)", ErrSecondRow, mu.Type())
}

// edgeChecker is implemented by the mutations of isolated entities; the
// idemgen extension generates the method. It reports an error, as for rows
// that do not exist, unless every row the mutation links to (of an isolated
// entity) belongs to tenant.
type edgeChecker interface {
	CheckTenantEdges(ctx context.Context, tenant string) error
}

// wherePer is implemented by every ent mutation.
type wherePer interface {
	WhereP(...func(*sql.Selector))
}

// isolate holds one mutation to the tenant of ctx: a new row gets the
// tenant (or must already have it), an update or delete reaches only the
// tenant's rows, and every row the mutation links to must be the tenant's.
func isolate(ctx context.Context, scope string, mu ent.Mutation) error {
	checker, ok := mu.(edgeChecker)
	if !ok {
		return errNotGenerated
	}
	tenant, hasTenant := tenancy.Tenant(ctx)
	all := tenancy.AllTenants(ctx)
	switch {
	case mu.Op().Is(ent.OpCreate):
		v, set := mu.Field(scope)
		row, _ := v.(string)
		switch {
		case !set && !hasTenant:
			return ErrNoTenant
		case !set:
			if err := mu.SetField(scope, tenant); err != nil {
				return err
			}
			row = tenant
		case hasTenant && !all && row != tenant:
			return fmt.Errorf("idemschema: a %s row of tenant %q created in a context of tenant %q", mu.Type(), row, tenant)
		}
		tenant = row
	case all:
		// Trusted code: the rows' own tenants hold for their links, which
		// only a single row's update can tell.
		if !mu.Op().Is(ent.OpUpdateOne) {
			return nil
		}
		old, err := oldScope(ctx, mu, scope)
		if err != nil {
			return err
		}
		tenant = old
	case !hasTenant:
		return ErrNoTenant
	default:
		wp, ok := mu.(wherePer)
		if !ok {
			return errNotGenerated
		}
		wp.WhereP(sql.FieldEQ(scope, tenant))
	}
	if mu.Op().Is(ent.OpDelete | ent.OpDeleteOne) {
		return nil
	}
	return checker.CheckTenantEdges(ctx, tenant)
}

// oldScope reads the tenant of the row an UpdateOne changes.
func oldScope(ctx context.Context, mu ent.Mutation, scope string) (string, error) {
	v, err := mu.OldField(ctx, scope)
	if err != nil {
		return "", err
	}
	s, _ := v.(string)
	return s, nil
}
