package engine

// A claim born completed (docs/protocol.md): an atomic create whose answer
// the row alone gives is one autocommitted statement. The row is built in
// memory (idembackend.RecordTable.Prepare), the resolver runs on a client
// that refuses statements, the field is rendered, and the row is inserted
// with its key, fingerprint, status succeeded and the rendered answer,
// ON CONFLICT DO NOTHING. Anything that needed the database (an edge, a
// resolver that reads or writes, an outbox job), an error, or a row the
// statement cannot write sends the attempt back to the atomic path, with
// nothing written: an atomic mutation's effects live in this database only
// (its contract), so running its resolver once more leaves no trace.

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/internal/tenancy"
)

// born is the state of an attempt tried as a claim born completed.
type born struct {
	prepared *idembackend.Prepared // nil until the field's resolver is reached, or when the row cannot be
	err      error                 // why Prepare failed
}

// mayBeBorn reports whether a's claim is tried born completed: a fresh
// claim, with a key, of an atomic mutation whose record table builds rows
// in memory, whose selection asks for fields of the row only (no
// sub-selection: an edge needs the database).
func (e *Engine) mayBeBorn(a *attempt) bool {
	r := a.req
	return a.fresh && r.spec.mode == modeAtomic && r.spec.records.Prepare != nil && r.key != "" &&
		!e.cfg.NoOneStatement && !r.spec.neverBorn.Load() && leavesOnly(r.field.SelectionSet)
}

// leavesOnly reports whether set selects leaf fields only (scalars, enums,
// __typename), fragments included.
func leavesOnly(set ast.SelectionSet) bool {
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			if len(sel.SelectionSet) > 0 {
				return false
			}
		case *ast.InlineFragment:
			if !leavesOnly(sel.SelectionSet) {
				return false
			}
		case *ast.FragmentSpread:
			if sel.Definition == nil || !leavesOnly(sel.Definition.SelectionSet) {
				return false
			}
		}
	}
	return true
}

// beginBorn is begin for a claim tried born completed: the row, built in
// memory, is the claim's row; the resolver's context carries the client
// that refuses statements and a guard with no transaction, which refuses
// every write.
func (a *attempt) beginBorn(ctx context.Context, args map[string]any) (context.Context, error) {
	a.begun = &begun{}
	p, err := a.req.spec.records.Prepare(tenancy.WithClaimInsert(ctx), a.claim, args)
	if err == nil && p == nil {
		err = errNotCompletable
	}
	if err != nil {
		a.born.err = err
		return ctx, errNotRun()
	}
	a.born.prepared = p
	return a.guardWrites(p.Bind(ctx)), nil
}

// runBorn tries a's claim born completed. ok false: go on as an atomic
// attempt, nothing was written; a's state is as new.
func (e *Engine) runBorn(ctx, actx context.Context, a *attempt, next graphql.RootResolver) (end ended, ok bool) {
	r := a.req
	a.born = &born{}
	defer a.unborn()
	// The try's errors are discarded (any sends the attempt to the
	// atomic path, which runs the resolver again and presents its own):
	// the server's presenter, which would log a refused write as an
	// unexpected error, never sees them.
	fieldCtx := graphql.WithResponseContext(withAttempt(withClaim(actx, a.claim, r.spec, &a.secondRow), a),
		discardedError, discardedPanic)
	res := next(fieldCtx)
	errs := graphql.GetErrors(fieldCtx)
	p := a.born.prepared
	if e.neverBorn(a) && !r.spec.neverBorn.Swap(true) {
		e.log(ctx, slog.LevelInfo, "the mutation cannot be one statement (its resolver or row needs statements, or the database has no such statement): its claims take the atomic path", r)
	}
	if p == nil || p.Tripped() || len(errs) > 0 || a.retryable || a.finals > 0 || a.secondRow.Load() ||
		a.guard.Refused() != "" || actx.Err() != nil {
		return ended{}, false
	}
	answer, response, tooLarge, err := encodeResponse(res, errs, e.cfg.MaxResponseBytes, recovering(ctx))
	if err != nil || tooLarge > 0 {
		return ended{}, false
	}
	at := a.reading.Now()
	expires := at.Add(r.spec.retention)
	start := time.Now()
	// Detached: a statement that commits while the client goes away is
	// as good as one it waited for (the key's next request replays it).
	dctx, cancel := detached(ctx)
	id, err := p.Insert(dctx, idembackend.Done{Response: response, At: at, Expires: expires})
	cancel()
	e.tel.claimed(ctx, r, time.Since(start))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// The key is taken: look it up and decide, as a claim that lost.
		return ended{kind: claimLost}, true // no sight: settle looks the key up
	case err != nil:
		// Nothing committed, or it did and the atomic claim finds the key
		// taken and replays it: either way the atomic path answers, with
		// the store's errors classified as everywhere.
		e.log(ctx, slog.LevelDebug, "claim born completed failed; trying the atomic path", r, slog.Any("error", err))
		return ended{}, false
	}
	e.tel.claims.Add(ctx, 1, r.spec.tel.claims)
	e.tel.responseSize.Record(ctx, int64(len(response)), r.spec.tel.field)
	if id != "" && answer.Data != nil {
		// The id the database assigned, where the row's sentinel was
		// rendered: the statement wrote the same into the stored answer.
		answer.Data = bytes.ReplaceAll(answer.Data, []byte(p.SentinelText()), []byte(id))
	}
	a.completedAt = at
	r.expiresAt = expires
	return ended{kind: answered, res: answer.marshaler(), outcome: outcomeExecuted}, true
}

// errNotCompletable: the row cannot be written born completed on this
// database (idembackend.Completable: MySQL, or an id neither known nor
// from a sequence).
var errNotCompletable = errors.New("idem: the row cannot be born completed here")

// neverBorn reports whether a's try born completed shows that no try of
// its field can succeed: its row cannot be born completed here, or needs
// a statement to be built, or its resolver (or what the selection
// resolves) reads or writes. Such a field is not the default create of
// its row; its claims take the atomic path from then on, and its resolver
// runs twice at most once per process. (An error of the resolver's, or
// an outage, says nothing of the next request: not counted.)
func (e *Engine) neverBorn(a *attempt) bool {
	if err := a.born.err; errors.Is(err, errNotCompletable) || errors.Is(err, idembackend.ErrNeedsStatement) {
		return true
	}
	p := a.born.prepared
	return p != nil && (p.Tripped() || a.secondRow.Load() || a.guard.Refused() != "")
}

// discardedError presents an error of a try born completed, which no
// client sees: wrapped at its path, not logged.
func discardedError(ctx context.Context, err error) *gqlerror.Error {
	return gqlerror.WrapPath(graphql.GetPath(ctx), err)
}

// discardedPanic is the recover function of a try born completed: the
// atomic path runs the resolver again, and its panic is logged there.
func discardedPanic(_ context.Context, p any) error { return fmt.Errorf("panic: %v", p) }

// unborn puts a back as newAttempt made it, after a try born completed.
func (a *attempt) unborn() {
	a.born = nil
	a.begun = nil
	a.claim.SetRow(nil)
	a.retryable, a.finals = false, 0
	a.secondRow.Store(false)
	a.guard = nil
}
