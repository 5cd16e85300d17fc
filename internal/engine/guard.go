package engine

// The guard of an attempt's writes. A resolver that writes through the
// application's non-transactional client, or opens a transaction of its
// own, commits those writes whether or not the mutation's result does: a
// crash after them and a retry (or the recoverer) make them twice. So,
// while the resolver runs, every ent mutation of the application's ent
// package is checked against the attempt's transaction by the hook idemgen
// generates first on every entity (idem_guard.go); one that writes
// elsewhere never reaches the database, and the attempt is refused,
// whatever the resolver did with the error. Reads are not checked; a write
// made with idem.CommitsAlone(ctx) is not either.

import (
	"context"
	"log/slog"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/claimctx"
	"github.com/goovo/idem/internal/refusal"
	"github.com/goovo/idem/internal/tenancy"
)

// guardWrites returns the resolver's context, txCtx (which carries the
// attempt's transaction), with the guard of its writes. Only the
// resolver's context carries it: the engine's own statements (the claim,
// the renewals, the completion) run on contexts made before it.
func (a *attempt) guardWrites(txCtx context.Context) context.Context {
	claimEntity := ""
	if !a.req.spec.records.RecordOnly {
		claimEntity = a.req.spec.records.Entity
	}
	a.guard = tenancy.NewGuard(claimctx.DriverTx(txCtx), resolverName(a.req.spec.name), claimEntity)
	return tenancy.WithGuard(txCtx, a.guard)
}

// writeOutsideClaim is the refusal of a mutation whose resolver wrote (or
// tried to) outside the attempt's transaction: the attempt was rolled back
// and the key released, since the fix is the server's, and the log names
// the resolver and the fix.
func (e *Engine) writeOutsideClaim(ctx context.Context, r *request, write string) error {
	e.log(ctx, slog.LevelError, "idempotent mutation refused: its resolver made "+write+
		"; write through ent.FromContext(ctx), the client of the claim's transaction, or mark a write that must commit on its own with idem.CommitsAlone(ctx)",
		r, slog.String("resolver", resolverName(r.spec.name)))
	return refusal.Errorf(idemcode.InternalServerError, r.key,
		"%s was not applied: the server's resolver writes outside the mutation's transaction, where its writes would commit whether or not the mutation does (a server bug, logged); nothing was stored and the key was released",
		r.spec.name)
}
