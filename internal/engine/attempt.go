package engine

// One attempt: the resolver runs once under a claim, in a transaction that
// commits its writes with the stored result, fenced by the attempt. How the
// claim and the writes commit is the mutation's mode, a strategy (leaseMode,
// atomicMode); everything else is the same in both.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/trace"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/claimctx"
	"github.com/goovo/idem/internal/effects"
	"github.com/goovo/idem/internal/outcome"
	"github.com/goovo/idem/internal/record"
	"github.com/goovo/idem/internal/refusal"
	"github.com/goovo/idem/internal/store"
	"github.com/goovo/idem/internal/tenancy"
	"github.com/goovo/idem/internal/timer"
)

// completionTimeout bounds the statements that must run to their end once
// the client has gone away (a claim, a release): how long they go on after
// it left, not how long they may take while it waits.
const completionTimeout = 5 * time.Second

// attempt is one run of the resolver under a claim: the state the root
// interceptor (run), the field interceptor (begin, observe) and the
// resolver (through its context) share.
type attempt struct {
	eng     *Engine
	req     *request
	claim   *idembackend.Claim
	fresh   bool // a new claim, to insert; else one taken over, already held
	reading store.Reading
	mode    mode
	// completedAt is the completion's time, once completion was called.
	completedAt time.Time
	// client is the request's context, which ends when its client hangs
	// up: a fresh claim is not made for a client that has gone, but an
	// attempt that has claimed runs on a context of its own (drain.go).
	client context.Context
	// abort ends the attempt's context (the lease lost).
	abort context.CancelCauseFunc
	// started: the attempt holds its claim (taken over, or inserted), from
	// when on its client's leaving no longer ends it. Until then it does:
	// a claim that waits for a pooled connection waits as long as its
	// client, as any statement of the request.
	started atomic.Bool

	// begun is what became of the claim when the field reached its
	// resolver; nil if it never did. Set once, on the resolver's
	// goroutine, before the resolver runs; read after gqlgen's next
	// returns. So is committed: this attempt committed its claim by itself
	// (lease mode), which it must release if it goes no further.
	begun     *begun
	committed bool

	// stopRenewal ends the lease renewals, if any, and waits for the last.
	stopRenewal func()

	// oneAtATime serialises the field tree's resolvers, which share the
	// transaction's connection (see InterceptField).
	oneAtATime sync.Mutex

	// Set by the field tree, whose resolvers may run concurrently.
	mu        sync.Mutex
	retryable bool
	finals    int

	// secondRow is set when the resolver created a row of the record
	// entity besides the claimed one (see withClaim, idemschema.ErrSecondRow).
	secondRow atomic.Bool
	// guard refuses the resolver's writes outside the attempt's
	// transaction (see guard.go); nil until begin opens it.
	guard *tenancy.Guard
	// born is set while the attempt is tried as a claim born completed
	// (born.go).
	born *born
}

// begun is how an attempt's start ended: its kind, and what goes with it.
type begun struct {
	kind beginKind
	// tx is the attempt's transaction (running).
	tx idembackend.Tx
	// lost is the record another request claimed the key with, between
	// the lookup and this attempt's claim (keyTaken).
	lost *store.Claimed
	// err is why the attempt could not start (failed): the input breaks
	// the record entity's rules (an *idemcode.Error), the store failed, or
	// the client had gone.
	err error
}

// beginKind is how an attempt's start ended.
type beginKind uint8

const (
	// running: the transaction is open, the resolver runs in it.
	running beginKind = iota + 1
	// keyTaken: another request claimed the key first.
	keyTaken
	// failed: the attempt could not start.
	failed
)

func beganRunning(tx idembackend.Tx) *begun { return &begun{kind: running, tx: tx} }

// beganFailing is the start that ended with lost (the key taken) or err,
// or nil when it did not.
func beganFailing(lost *store.Claimed, err error) *begun {
	switch {
	case lost != nil:
		return &begun{kind: keyTaken, lost: lost}
	case err != nil:
		return &begun{kind: failed, err: err}
	}
	return nil
}

// newAttempt prepares a fresh claim of r's key at the time of seen
// (attempt 1), which a takeover turns into the next attempt of an existing
// claim.
func (e *Engine) newAttempt(r *request, seen *sight) *attempt {
	now := seen.now
	return &attempt{
		eng: e, req: r, fresh: true, reading: seen.reading, mode: modes[r.spec.mode],
		stopRenewal: func() {},
		claim: &idembackend.Claim{
			Tenant:         r.tenant,
			Key:            r.key,
			Fingerprint:    r.fingerprint,
			Attempt:        1,
			Mode:           r.spec.mode,
			ClaimedAt:      now,
			LeaseExpiresAt: now.Add(r.spec.lease),
			Operation:      r.operation,
		},
	}
}

// takenOver makes a the attempt after rec's.
func (a *attempt) takenOver(rec *record.Record) {
	a.fresh = false
	a.claim.Attempt = rec.Attempt + 1
	a.claim.ClaimedAt = rec.ClaimedAt
}

// holdsClaim reports whether the claim is committed and this attempt's:
// taken over, or claimed by itself in lease mode. Such a claim must be
// released when the attempt does not complete.
func (a *attempt) holdsClaim() bool { return !a.fresh || a.committed }

// ended is how an attempt ended: its kind, and what goes with it.
type ended struct {
	kind endKind
	// outcome, res and err answer the request (answered).
	outcome fieldOutcome
	res     graphql.Marshaler
	err     error
	// lost is what the claim that lost read (claimLost), to decide on in
	// place of a lookup.
	lost *sight
}

// endKind is how an attempt ended.
type endKind uint8

const (
	// answered: the attempt answers the request.
	answered endKind = iota + 1
	// fencedOut: the resolver ran, but another attempt took the claim over
	// meanwhile, and this one's writes were rolled back: look at the key
	// again.
	fencedOut
	// claimLost: the claim found the key taken, before the resolver ran.
	claimLost
)

// answer is the end of an attempt that answers with res or err.
func answer(outcome fieldOutcome, res graphql.Marshaler, err error) ended {
	return ended{kind: answered, outcome: outcome, res: res, err: err}
}

// refused is the end of an attempt that answers with err.
func refused(err error) ended { return answer(outcomeRefused, nil, err) }

// run runs the resolver once under a's claim and stores its result.
//
// Once the attempt has claimed the key it runs to its end whether or not
// the client still waits: the resolver, the completion and the release
// run on the attempt's own context (actx, drain.go), which the request's
// end does not cancel. The answer goes to a client that may have gone; the
// stored result is what counts, and the key's next request replays it.
func (e *Engine) run(ctx context.Context, a *attempt, next graphql.RootResolver) ended {
	r := a.req
	actx, abort, end, err := e.attempts.start(ctx, e.cfg.AttemptTimeout)
	if err != nil {
		if a.holdsClaim() {
			e.release(ctx, r, a.claim.Attempt)
		}
		return refused(refusal.Errorf(idemcode.Unavailable, r.key, "the server is shutting down; the mutation was not applied, retry with the same key"))
	}
	defer end()
	a.client, a.abort = ctx, abort
	a.started.Store(!a.fresh)
	stop := context.AfterFunc(ctx, func() {
		if !a.started.Load() {
			abort(context.Cause(ctx))
		}
	})
	defer stop()
	if e.mayBeBorn(a) {
		if end, ok := e.runBorn(ctx, actx, a, next); ok {
			return end
		}
	}
	fieldCtx := graphql.WithFreshResponseContext(withAttempt(withClaim(actx, a.claim, r.spec, &a.secondRow), a))
	res := next(fieldCtx)
	a.stopRenewal()
	return e.conclude(ctx, actx, a, res, graphql.GetErrors(fieldCtx))
}

// conclude ends an attempt once the resolver has returned res and errs
// (or never ran): it rolls back and releases the claim when the attempt
// must not complete, and stores the result otherwise. ctx is the
// request's, actx the attempt's own (run).
func (e *Engine) conclude(ctx, actx context.Context, a *attempt, res graphql.Marshaler, errs gqlerror.List) ended {
	r := a.req
	if a.begun == nil || a.begun.kind != running {
		return e.notRun(ctx, a, res, errs)
	}
	if a.secondRow.Load() {
		a.rollback(ctx)
		e.release(actx, r, a.claim.Attempt)
		e.tel.failed(ctx, r, "retryable")
		return refused(e.secondRow(ctx, r))
	}
	if write := a.guard.Refused(); write != "" {
		a.rollback(ctx)
		e.release(actx, r, a.claim.Attempt)
		e.tel.failed(ctx, r, "retryable")
		return refused(e.writeOutsideClaim(ctx, r, write))
	}
	if a.retryable || len(errs) > a.finals || actx.Err() != nil {
		// A transient failure, or the attempt's end (its deadline, its
		// lease lost, the shutdown's drain over): undo everything, free the
		// key for a retry.
		a.rollback(ctx)
		e.release(actx, r, a.claim.Attempt)
		e.tel.failed(ctx, r, "retryable")
		attrs := []slog.Attr{slog.Int("attempt", a.claim.Attempt)}
		if actx.Err() != nil {
			attrs = append(attrs, slog.String("ended_by", context.Cause(actx).Error()))
		}
		e.log(ctx, slog.LevelInfo, "idempotent mutation failed with a retryable error; claim released", r, attrs...)
		addErrors(ctx, e.releasedErrors(r, errs))
		return answer(outcomeReleased, graphql.Null, nil)
	}
	return e.storeResult(ctx, actx, a, res, errs)
}

// storeResult stores the result of an attempt whose resolver ran to its end
// (res with the final errors errs) with its writes, fenced by the attempt,
// and answers with it.
func (e *Engine) storeResult(ctx, actx context.Context, a *attempt, res graphql.Marshaler, errs gqlerror.List) ended {
	r := a.req
	status := record.StatusSucceeded
	if len(errs) > 0 {
		status = record.StatusFailed
	}
	stored, response, tooLarge, err := encodeResponse(res, errs, e.cfg.MaxResponseBytes, recovering(ctx))
	if err != nil {
		a.rollback(ctx)
		e.release(actx, r, a.claim.Attempt)
		return refused(e.unavailable(r, err))
	}
	ok, err := a.mode.complete(actx, a, status, response)
	if err != nil {
		// The release is fenced: if the commit did happen after all, it
		// changes nothing, and the retry replays the result.
		e.release(actx, r, a.claim.Attempt)
		return refused(e.unconfirmed(r, err))
	}
	if !ok {
		// Another attempt took the claim over while this one ran: its result
		// is the only one; this attempt's writes are rolled back.
		e.log(ctx, slog.LevelWarn, "idempotent attempt lost its claim; its writes were rolled back", r, slog.Int("attempt", a.claim.Attempt))
		return ended{kind: fencedOut}
	}
	e.tel.responseSize.Record(ctx, int64(len(response)), r.spec.tel.field)
	if status == record.StatusFailed {
		e.tel.failed(ctx, r, "final")
	}
	if tooLarge > 0 {
		e.log(ctx, slog.LevelWarn, "idempotent mutation's result exceeds Config.MaxResponseBytes and was not stored; retries get IDEMPOTENCY_RESPONSE_NOT_STORED",
			r, slog.Int("bytes", tooLarge))
	}
	addErrors(ctx, errs)
	r.expiresAt = a.completedAt.Add(r.spec.retention)
	return answer(outcomeExecuted, stored.marshaler(), nil)
}

// releasedErrors are the errors of a released attempt as its client gets
// them: each with the key (extensions.idempotencyKey), and the generic
// message of an unexpected error (INTERNAL_SERVER_ERROR with a correlation
// id; a message the application wrote is kept as written) saying what the
// client must do. A client that takes it for a failure and starts over
// with a new key may have the intent carried out twice: by its new key,
// and by this one, which the recoverer (Config.RecoverAfter) finishes when
// its client does not come back, or which a late retry of the old request
// runs again.
func (e *Engine) releasedErrors(r *request, errs gqlerror.List) gqlerror.List {
	advice := "The mutation did not complete and nothing was stored: retry with the same idempotency key, never a new one, so that the intent is carried out once."
	if e.cfg.RecoverAfter > 0 && r.spec.recoverable && r.spec.mode != modeAtomic {
		advice = "The mutation did not complete and nothing was stored: retry with the same idempotency key, never a new one. If you do not come back, the server finishes this intent itself, so a new key could carry it out twice."
	}
	out := make(gqlerror.List, len(errs))
	for i, g := range errs {
		cp := *g
		cp.Extensions = maps.Clone(g.Extensions)
		if cp.Extensions == nil {
			cp.Extensions = map[string]any{}
		}
		cp.Extensions["idempotencyKey"] = r.key
		if _, generic := cp.Extensions["correlationId"]; generic {
			cp.Message += ". " + advice
		}
		out[i] = &cp
	}
	return out
}

// notRun ends an attempt whose resolver did not run: nothing was written
// but, perhaps, the claim.
func (e *Engine) notRun(ctx context.Context, a *attempt, res graphql.Marshaler, errs gqlerror.List) ended {
	if a.holdsClaim() {
		e.release(ctx, a.req, a.claim.Attempt)
	}
	if b := a.begun; b != nil {
		var input *idemcode.Error
		switch {
		case b.kind == keyTaken:
			return ended{kind: claimLost, lost: &sight{rec: b.lost.Holder, reading: b.lost.Reading, now: b.lost.Reading.Now()}}
		case errors.As(b.err, &input):
			return refused(input)
		case b.kind == failed:
			return refused(e.unavailable(a.req, b.err))
		}
	}
	// gqlgen refused the field before its resolver (argument coercion):
	// the same request would be refused again.
	addErrors(ctx, errs)
	return answer(outcomeRefused, res, nil)
}

// mode is how an attempt commits its claim and its writes: lease or atomic.
type mode interface {
	// begin claims the key, when the attempt is a fresh claim, and opens
	// the transaction the resolver writes in.
	begin(ctx context.Context, a *attempt, args map[string]any) (context.Context, *begun)
	// complete stores the result, fenced by the attempt, with the
	// resolver's writes (a final failure without them), and commits. It
	// reports false when the attempt lost its claim.
	complete(ctx context.Context, a *attempt, status string, response []byte) (bool, error)
}

var modes = map[string]mode{modeLease: leaseMode{}, modeAtomic: atomicMode{}}

// leaseMode commits the claim by itself before the resolver runs, so that
// work outside the database is never done without a claim, and renews the
// lease while the resolver runs where the store needs it.
type leaseMode struct{}

func (leaseMode) begin(ctx context.Context, a *attempt, args map[string]any) (context.Context, *begun) {
	if a.fresh {
		// The claim commits by itself: detached from the request, so that
		// a client going away cannot leave it committed but unknown to us
		// (and so unreleased). Started before it is sent, so that a client
		// that hangs up once the claim may have committed does not abort
		// the attempt (marked after the commit, a hang-up in between
		// cancelled the transaction's BEGIN on database/sql and the claim
		// waited for the recoverer: seen on MariaDB,
		// TestDisconnectedPaymentIsFinished); the insert itself still ends
		// with its client, as a claim not yet made does.
		a.started.Store(true)
		dctx, cancel := detachedFollowing(ctx, a.clientOr(ctx))
		lost, err := a.insertClaim(dctx, nil, args)
		cancel()
		if b := beganFailing(lost, err); b != nil {
			return ctx, b
		}
		a.committed = true
	}
	txCtx, tx, err := a.eng.store.Begin(ctx)
	if err != nil {
		return ctx, beganFailing(nil, err)
	}
	if a.eng.store.Traits().RenewLeases {
		a.startRenewal(ctx)
	}
	return txCtx, beganRunning(tx)
}

func (leaseMode) complete(ctx context.Context, a *attempt, status string, response []byte) (bool, error) {
	tx := a.begun.tx
	if status == record.StatusFailed {
		// A stored failure keeps none of the resolver's writes: they roll
		// back, and the failure commits by itself, however the client
		// leaves.
		a.rollback(ctx)
		tx = nil
		var cancel context.CancelFunc
		ctx, cancel = detached(ctx)
		defer cancel()
	}
	return a.eng.store.Complete(ctx, tx, a.completion(status, response, false))
}

// atomicMode makes the claim the transaction's first write: claim, writes
// and result commit together, and a concurrent duplicate waits on the
// unique index for the outcome. A savepoint after the claim lets a final
// error roll back the resolver's writes but keep the claim.
type atomicMode struct{}

func (atomicMode) begin(ctx context.Context, a *attempt, args map[string]any) (context.Context, *begun) {
	txCtx, tx, err := a.eng.store.Begin(ctx)
	if err != nil {
		return ctx, beganFailing(nil, err)
	}
	if a.fresh {
		// A claim that does not win rolls the transaction back.
		if b := beganFailing(a.insertClaim(txCtx, tx, args)); b != nil {
			return ctx, b
		}
		a.started.Store(true)
	}
	if err := a.eng.store.Savepoint(txCtx, tx); err != nil {
		_ = tx.Rollback()
		return ctx, beganFailing(nil, err)
	}
	return txCtx, beganRunning(tx)
}

func (atomicMode) complete(ctx context.Context, a *attempt, status string, response []byte) (bool, error) {
	return a.eng.store.Complete(ctx, a.begun.tx, a.completion(status, response, status == record.StatusFailed))
}

func (a *attempt) completion(status string, response []byte, discardWrites bool) store.Completion {
	a.completedAt = a.reading.Now()
	return store.Completion{Ref: a.req.ref(), Attempt: a.claim.Attempt, Status: status, Response: response,
		At: a.completedAt, ExpiresAt: a.completedAt.Add(a.req.spec.retention), DiscardWrites: discardWrites}
}

// begin starts the attempt when the field reaches its resolver, where the
// typed arguments are known: the mode claims the key and opens the
// transaction. An attempt that cannot start ends the field with errNotRun;
// run answers for it.
func (a *attempt) begin(ctx context.Context, args map[string]any) (context.Context, error) {
	if a.born != nil {
		return a.beginBorn(ctx, args)
	}
	if a.fresh && a.client != nil && a.client.Err() != nil {
		// The client hung up before the key was claimed: nothing started,
		// and nobody asks for it any more.
		a.begun = beganFailing(nil, context.Cause(a.client))
		return ctx, errNotRun()
	}
	txCtx, b := a.mode.begin(ctx, a, args)
	a.begun = b
	if b.kind != running {
		return ctx, errNotRun()
	}
	r := a.req
	txCtx = a.guardWrites(txCtx)
	return effects.With(txCtx, &effects.Scope{Dialect: a.eng.cfg.Backend.Dialect(),
		Table: r.spec.table.Name, Tenant: r.tenant, Key: r.key, Tx: claimctx.DriverTx(txCtx)}), nil
}

// insertClaim inserts the claim row: the claim of settle's Claim decision,
// through the record table's generated Insert. lost is the holder's record
// when the key was taken; err is a refusal of the input (*idemcode.Error)
// or a store failure.
func (a *attempt) insertClaim(ctx context.Context, tx idembackend.Tx, args map[string]any) (lost *store.Claimed, err error) {
	tel, r := a.eng.tel, a.req
	claimed, err := a.eng.store.Claim(ctx, store.Claim{Ref: r.ref(), Tx: tx,
		Insert: func(ctx context.Context, tx idembackend.Tx) (bool, error) {
			start := time.Now()
			defer func() { tel.claimed(ctx, r, time.Since(start)) }()
			return r.spec.records.Insert(tenancy.WithClaimInsert(ctx), tx, a.claim, args)
		}})
	var in *idembackend.InputError
	switch {
	case errors.As(err, &in):
		return nil, refusal.Errorf(idemcode.BadUserInput, a.claim.Key, "%s", in.Message)
	case err != nil:
		return nil, err
	case !claimed.Won:
		return &claimed, nil
	}
	tel.claims.Add(ctx, 1, r.spec.tel.claims)
	trace.SpanFromContext(ctx).AddEvent("claimed")
	return nil, nil
}

// startRenewal renews the lease every third of its length while the
// resolver runs, so that a live attempt that runs longer than its lease is
// not taken over (and fenced out) by every retry: only a dead attempt's
// lease runs out.
func (a *attempt) startRenewal(ctx context.Context) {
	e, r := a.eng, a.req
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.spec.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			// The renewal may wait for a row lock that this attempt's own
			// transaction holds: stopRenewal cancels it.
			ok, err := e.store.Renew(hctx, store.Lease{Ref: r.ref(), Attempt: a.claim.Attempt, Until: a.reading.Now().Add(r.spec.lease)})
			if hctx.Err() != nil {
				return // stopped
			}
			if err == nil && !ok {
				// The claim is lost: the completion would be fenced out,
				// the attempt ends now.
				if a.abort != nil {
					a.abort(errLeaseLost)
				}
				return
			}
			if err != nil {
				e.log(ctx, slog.LevelWarn, "could not renew the idempotency lease", r, slog.Any("error", err))
			}
		}
	}()
	a.stopRenewal = func() {
		cancel()
		<-done
	}
}

// observe classifies a resolver error (or panic) of the field's tree.
func (a *attempt) observe(err error, panicked bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if panicked || !finalError(err) {
		a.retryable = true
		return
	}
	a.finals++
}

func (a *attempt) rollback(ctx context.Context) {
	// A transaction whose request was cancelled is already rolled back
	// (database/sql does it when the context ends): ErrTxDone is expected.
	if err := a.begun.tx.Rollback(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, sql.ErrTxDone) {
		a.eng.log(ctx, slog.LevelDebug, "rollback failed", a.req, slog.Any("error", err))
	}
}

// detached returns a context for a statement that must run to its end even
// when the client has gone away: one that commits by itself, whose outcome
// the protocol must know. While the client waits, so does the statement, as
// any other of the request (for a connection of a busy pool, for a
// database slowed by load): a loaded server queues the request, it does not
// answer IDEMPOTENCY_UNAVAILABLE while the client is still there. Once the
// request's context ends, the statement has completionTimeout more.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return detachedFollowing(ctx, ctx)
}

// detachedFollowing is detached with ctx's values, ended completionTimeout
// after follow ends.
func detachedFollowing(ctx, follow context.Context) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(follow, func() {
		t := time.NewTimer(completionTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancel(fmt.Errorf("%w: the client has gone, and the statement did not end within %v", context.DeadlineExceeded, completionTimeout))
		case <-dctx.Done():
		}
	})
	return dctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// clientOr returns the request's context, or ctx when the attempt has
// none.
func (a *attempt) clientOr(ctx context.Context) context.Context {
	if a.client != nil {
		return a.client
	}
	return ctx
}

// release ends the lease of a claim whose attempt will not complete, so that
// a retry takes it over at once. It runs even when the client has gone away.
// A release is fenced, so trying again is always safe, and worth it: a claim
// left behind blocks its key until its lease runs out. When the first tries
// fail (a pooled connection broken by a cancelled request; a row lock on
// PostgreSQL; on SQLite, other transactions holding the write lock past the
// busy timeout), release answers and goes on trying in the background until
// the lease would have run out anyway.
func (e *Engine) release(ctx context.Context, r *request, attempt int) {
	dctx, cancel := detached(ctx)
	err := e.tryRelease(dctx, r, attempt)
	cancel()
	if err == nil {
		return
	}
	e.log(ctx, slog.LevelWarn, "could not release idempotency claim yet; trying again in the background", r, slog.Any("error", err))
	leaseOver := time.Now().Add(r.spec.lease)
	bg := context.WithoutCancel(ctx)
	go func() {
		for delay := 100 * time.Millisecond; time.Now().Add(delay).Before(leaseOver); delay = min(2*delay, 2*time.Second) {
			time.Sleep(delay)
			ctx, cancel := context.WithDeadline(bg, leaseOver)
			err = e.tryRelease(ctx, r, attempt)
			cancel()
			if err == nil {
				e.log(bg, slog.LevelInfo, "idempotency claim released after retries", r)
				return
			}
		}
		e.log(bg, slog.LevelWarn, "could not release idempotency claim; it frees itself when its lease runs out", r, slog.Any("error", err))
	}()
}

// tryRelease releases the claim of attempt, with up to three tries.
func (e *Engine) tryRelease(ctx context.Context, r *request, attempt int) error {
	var err error
	for try := range 3 {
		var reading store.Reading
		if reading, err = e.store.Now(ctx); err == nil {
			err = e.store.Release(ctx, store.Lease{Ref: r.ref(), Attempt: attempt, Until: reading.Now()})
		}
		if err == nil || timer.Sleep(ctx, time.Duration(try+1)*50*time.Millisecond) != nil {
			break
		}
	}
	return err
}

type attemptKey struct{}

func withAttempt(ctx context.Context, a *attempt) context.Context {
	return context.WithValue(ctx, attemptKey{}, a)
}

func attemptFrom(ctx context.Context) *attempt {
	a, _ := ctx.Value(attemptKey{}).(*attempt)
	return a
}

// errNotRun ends a field whose claim or transaction could not be made; the
// root interceptor answers for it (and drops this error). A new error each
// time: gqlgen writes the field's path and location into it.
func errNotRun() error { return &gqlerror.Error{Message: "idempotent mutation did not run"} }

// isRoot reports whether field is the attempt's root field, where the
// attempt begins.
func (a *attempt) isRoot(field *ast.Field) bool { return field == a.req.field }

// withClaim returns ctx carrying c, a claim of a record of spec's table:
// for idemschema's interceptor, which shows the caller its own unfinished
// claim, and its hook, which refuses a second row of the claim's entity
// and sets secondRow.
func withClaim(ctx context.Context, c *idembackend.Claim, spec *fieldSpec, secondRow *atomic.Bool) context.Context {
	tc := tenancy.Claim{Table: spec.table.Name, Tenant: c.Tenant, Key: c.Key, SecondRow: secondRow}
	if !spec.records.RecordOnly {
		tc.Entity = spec.records.Entity
	}
	return claimctx.WithClaim(tenancy.WithClaim(ctx, tc), c)
}

// secondRow is the refusal of a mutation whose resolver created a row of
// its record entity besides the one the claim inserted (it kept entgql's
// default create body, say): the attempt was rolled back and the key
// released, since the fix is the server's, and the log names the resolver.
func (e *Engine) secondRow(ctx context.Context, r *request) error {
	entity := r.spec.records.Entity
	e.log(ctx, slog.LevelError, "idempotent mutation refused: its resolver creates a "+entity+
		" of its own instead of using the claimed row; make it return ent.Claimed"+entity+"(ctx) (the claim inserted that row from the arguments)",
		r, slog.String("resolver", resolverName(r.spec.name)))
	return refusal.Errorf(idemcode.InternalServerError, r.key,
		"%s was not applied: the server's resolver creates a second %s instead of using the claimed one (a server bug, logged); nothing was stored and the key was released",
		r.spec.name, entity)
}

// resolverName is the Go method gqlgen generates for a mutation field.
func resolverName(field string) string {
	if field == "" {
		return field
	}
	return "mutationResolver." + strings.ToUpper(field[:1]) + field[1:]
}

// finalError reports whether a resolver's error ends the attempt for good:
// marked Final; or, unless marked Retryable, an error the same attempt
// meets on every run: the database's refusal of text it cannot store (a NUL
// character on PostgreSQL), which the presenter answers BAD_USER_INPUT, and
// ent's not-found and constraint errors (idembackend.ClientError), which it
// answers NOT_FOUND and BAD_USER_INPUT.
func finalError(err error) bool {
	if marked, final := outcome.Marked(err); marked {
		return final
	}
	var ce idembackend.ClientError
	return store.Unstorable(err) || errors.As(err, &ce)
}
