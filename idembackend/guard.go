package idembackend

import (
	"context"

	"entgo.io/ent/dialect"

	"github.com/goovo/idem/internal/tenancy"
)

// ErrWriteOutsideClaim is the error of a write that a resolver of an
// idempotent mutation makes outside the claim's transaction: through the
// application's non-transactional client (r.client.T.Create()…Save(ctx))
// or through a transaction of its own (r.client.Tx(ctx) … Commit()). Such a
// write would commit whether or not the mutation's result does, and a
// retry after a crash would make it again: two rows, money moved twice.
// The write never reaches the database, and the hook refuses the whole
// mutation whatever the resolver does with the error: the client gets
// INTERNAL_SERVER_ERROR, the attempt is rolled back, the key is released,
// and the log names the resolver. The fix is to write through
// ent.FromContext(ctx), the client bound to the claim's transaction; a
// write that must commit on its own says so with idem.CommitsAlone(ctx).
var ErrWriteOutsideClaim = tenancy.ErrWriteOutsideClaim

// CheckWrite is called by the hook idemgen generates first on every entity
// of every client of an ent package (idem_guard.go), for each mutation:
// while the resolver of an idempotent mutation runs in ctx, it refuses
// (ErrWriteOutsideClaim, naming the resolver and the fix) a mutation whose
// client's driver transaction tx (nil outside a transaction) is not the
// claim's. entity and op are the mutation's type and operation as ent
// prints them ("Payment", "OpCreate"); pkg is the ent package's name.
// Outside an idempotent mutation, and under WithoutWriteGuard, it returns
// nil.
func CheckWrite(ctx context.Context, pkg, entity, op string, tx dialect.Tx) error {
	if g := tenancy.GuardOf(ctx); g != nil {
		return g.Check(pkg, entity, op, tx)
	}
	return nil
}

// WithoutWriteGuard returns ctx in which CheckWrite lets every write
// through: what idem.CommitsAlone returns.
func WithoutWriteGuard(ctx context.Context) context.Context {
	return tenancy.WithoutGuard(ctx)
}
