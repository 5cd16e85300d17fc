package idem

// The request flow of one idempotent mutation field, in the order it
// happens. Each layer has one verb: the hook serves a field (serve), which
// validates its request before any database work (validate), settles its
// key (settle: look it up, then replay, refuse, wait, take over or claim)
// and, when the mutation must run, runs one attempt (run, in attempt.go:
// the transaction, the lease, the completion). A call without a key to a
// mutation whose key is optional during a rollout runs without any of this
// (runKeyless, in keyless.go).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/trace"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemhttp"
	"github.com/goovo/idem/internal/document"
	"github.com/goovo/idem/internal/fingerprint"
	"github.com/goovo/idem/internal/idemkey"
	"github.com/goovo/idem/internal/record"
	"github.com/goovo/idem/internal/refusal"
	"github.com/goovo/idem/internal/reqstate"
	"github.com/goovo/idem/internal/store"
	"github.com/goovo/idem/internal/timer"
)

// maxSelectionFields bounds an idempotent mutation's selection, fragments
// expanded, whatever Limits say: the fingerprint prints it expanded, so that
// a fragment spread twice in each of 40 nested fragments, a short document
// that Limits.MaxFields refuses, would otherwise be printed 2^40 times
// (IDEMPOTENCY_REQUEST_TOO_LARGE).
const maxSelectionFields = 10_000

// maxRounds bounds how often one request looks the key up again after losing
// a race (a conflicting claim, a takeover by someone else, a lost lease).
const maxRounds = 5

// request is one idempotent field of one operation, validated.
type request struct {
	spec *fieldSpec
	// field is the field's first occurrence in the document: the one
	// gqlgen's field contexts name, where errors point.
	field *ast.Field
	// executed is the field as GraphQL executes it: field, or, when the
	// operation selects it more than once under its response name, a copy
	// with every occurrence's selection (executedField). It is what is
	// fingerprinted, kept for the recoverer and replayed.
	executed *ast.Field
	alias    string
	tenant   string
	key      string
	// keyInHeader: the key came from the Idempotency-Key header, the
	// argument being absent or null.
	keyInHeader bool
	fingerprint string
	// operation is what the claim keeps for the recoverer (nil: nothing).
	operation []byte
	// id is ref().ID(), made once the request is validated: it names the
	// record in the hook's in-memory maps.
	id string
}

// ref names the request's record.
func (r *request) ref() store.Ref {
	return store.Ref{Table: r.spec.table, Tenant: r.tenant, Key: r.key}
}

// serve answers one idempotent mutation field.
func (e *Extension) serve(ctx context.Context, spec *fieldSpec, oc *graphql.OperationContext, field graphql.CollectedField, next graphql.RootResolver) graphql.Marshaler {
	r := &request{spec: spec, field: field.Field, executed: executedField(field), alias: field.Alias}
	ctx, span := e.tel.startSpan(ctx, r)
	var (
		res     graphql.Marshaler
		outcome string
	)
	start := time.Now()
	err := e.validate(ctx, r, oc)
	switch {
	case r.spec.keyOptional && errors.Is(err, ErrKeyMissing):
		// The key is optional during a rollout (keyless.go): the call runs
		// as the mutation did before it was idempotent.
		res, outcome, err = e.runKeyless(ctx, r, next)
	case err == nil:
		r.id = r.ref().ID()
		leave, queued := e.admit(ctx, r)
		if leave != nil {
			defer leave()
		}
		res, outcome, err = e.settle(ctx, r, queued || e.finished.has(r.id) || retried(ctx), next)
		if err == nil && (outcome == idemhttp.OutcomeExecuted || outcome == idemhttp.OutcomeReplayed) {
			e.finished.add(r.id)
		}
	}
	if err != nil {
		outcome = idemhttp.OutcomeRefused
	}
	if outcome == idemhttp.OutcomeExecuted {
		spec.pace.observe(time.Since(start))
	}
	finishSpan(span, r, outcome, err)
	operationFrom(ctx).record(r.alias, r.key, outcome)
	if err != nil {
		return e.refuse(ctx, r, err)
	}
	return res
}

// validate reads the request's key, tenant and fingerprint, all before any
// database work.
func (e *Extension) validate(ctx context.Context, r *request, oc *graphql.OperationContext) error {
	key, inHeader, err := e.keyOf(ctx, oc, r.field)
	if err != nil {
		return err
	}
	r.key, r.keyInHeader = key, inHeader
	if r.tenant, err = e.tenant(ctx, key); err != nil {
		return err
	}
	if n := document.ExpandedFields(r.executed.SelectionSet); n > maxSelectionFields {
		return refusal.Errorf(CodeRequestTooLarge, key, "the mutation's selection has %s fields, fragments expanded; the limit is %d", document.Count(n), maxSelectionFields)
	}
	fp := fingerprint.Of(e.schema, e.schema.Mutation.Name, r.executed, oc.Variables, KeyArgument)
	if fp.ArgumentsSize > e.cfg.MaxArgumentBytes {
		return refusal.Errorf(CodeRequestTooLarge, key, "the mutation's arguments are %d bytes; the limit is %d", fp.ArgumentsSize, e.cfg.MaxArgumentBytes)
	}
	r.fingerprint = fp.String()
	// An atomic claim commits with its result or not at all, and the
	// completion clears the operation: no recoverer could ever read it, so
	// it is neither formatted nor sent.
	if r.spec.recoverable && r.spec.mode != ModeAtomic {
		var caller []byte
		if e.cfg.Caller != nil {
			caller = e.cfg.Caller(ctx)
		}
		r.operation = e.operations.of(oc, r.executed, r.executed == r.field, key, r.keyInHeader, caller)
	}
	return nil
}

// keyOf returns the field's key, from its argument or, with
// Config.KeyHeader, from the Idempotency-Key header (inHeader), and
// validates it. MutateOperationContext has already refused a header that
// conflicts with the argument or names the key of several fields.
func (e *Extension) keyOf(ctx context.Context, oc *graphql.OperationContext, field *ast.Field) (key string, inHeader bool, err error) {
	key, present, err := keyArgument(oc, field)
	if err != nil {
		return "", false, err
	}
	if !present && e.cfg.KeyHeader {
		if st := reqstate.From(ctx); st != nil && st.HasKey {
			key, present, inHeader = st.Key, true, true
		}
	}
	if !present {
		where := KeyArgument
		if e.cfg.KeyHeader {
			where += " (or the " + idemhttp.HeaderKey + " header)"
		}
		return "", false, refusal.Errorf(CodeKeyMissing, "", "%s is required: send one key per intent and reuse it on every retry", where)
	}
	if err := idemkey.Validate(key); err != nil {
		return "", false, err
	}
	return key, inHeader, nil
}

// keyArgument reads the field's key argument; present is false when it is
// absent or null.
func keyArgument(oc *graphql.OperationContext, field *ast.Field) (key string, present bool, err error) {
	a := field.Arguments.ForName(KeyArgument)
	if a == nil {
		return "", false, nil
	}
	v, verr := a.Value.Value(oc.Variables)
	if verr != nil {
		return "", false, refusal.Errorf(CodeKeyInvalid, "", "%s must be a string", KeyArgument)
	}
	if v == nil {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, refusal.Errorf(CodeKeyInvalid, "", "%s must be a string", KeyArgument)
	}
	return s, true, nil
}

// ValidateKey checks a key the way the hook does before any database work:
// 1 to MaxKeyLength characters of printable ASCII. Its error is an
// *idemcode.Error of code IDEMPOTENCY_KEY_INVALID (ErrKeyInvalid).
func ValidateKey(key string) error { return idemkey.Validate(key) }

func (e *Extension) tenant(ctx context.Context, key string) (string, error) {
	t, err := e.cfg.Tenant(ctx)
	if err != nil || t == "" {
		return "", refusal.Errorf(CodeUnauthenticated, key, "the request has no authenticated tenant")
	}
	// A tenant is stored with every record: one the database cannot store
	// would fail every lookup (a store outage on PostgreSQL).
	if why := document.Why(t); why != "" {
		return "", refusal.Errorf(CodeUnauthenticated, key, "the request's tenant holds %s", why)
	}
	return t, nil
}

// settle is the protocol: claim the key, or look it up and replay, refuse
// or take it over, and look again whenever a race was lost.
//
// Where the store's claim doubles as its lookup (Traits.ClaimFirst), the
// first round claims without looking first: for a new key (the common case)
// the insert is the lookup, and saves a round trip. When the key exists the
// insert changes nothing and the claim reads the record that holds it, so a
// retry of a finished key pays instead: two statements where a lookup alone
// would do in lease mode; in atomic mode, where the claim sits in the
// transaction, begin, the insert and rollback before the lookup. Retries are
// the exception, and a concurrent duplicate in atomic mode needs the
// transaction anyway, to wait on the unique index for the first attempt.
//
// A request whose key most likely has a record already looks first all
// the same (lookFirst): one that queued behind an identical request of
// this process (admit), which has most likely claimed and finished the
// key (the duplicates of a burst, let go together, then share one lookup
// instead of each sending a claim that writes nothing); one whose record
// this process has seen finished (finishedRecords); and one whose client
// says it is a retry (idemhttp.HeaderRetry), which most often reaches a process
// that has not seen the key. The lookup decides nothing by itself: what
// it reads is what a claim that lost would have read, and a key it finds
// unknown is claimed as usual.
func (e *Extension) settle(ctx context.Context, r *request, lookFirst bool, next graphql.RootResolver) (graphql.Marshaler, string, error) {
	waitUntil := time.Now().Add(e.cfg.WaitForInFlight)
	look := lookFirst || !e.store.Traits().ClaimFirst
	var lost *store.Claimed // what the last lost claim read, decided on in place of a lookup
	ran := false            // this request already ran the resolver once
	for round := 0; round < maxRounds; {
		var (
			rec     *store.Record
			reading store.Reading
			err     error
		)
		switch {
		case lost != nil:
			rec, reading = lost.Holder, lost.Reading
		case look:
			rec, reading, err = e.lookup(ctx, r)
		default:
			reading, err = e.store.Now(ctx)
		}
		look, lost = true, nil
		if err != nil {
			return nil, "", e.unavailable(r, err)
		}
		now := reading.Now()
		// What this request will run as, if it runs: a fresh claim, unless
		// it takes an expired one over below.
		a := e.newAttempt(r, reading, now)
		if rec != nil {
			if err := e.refuseRecord(r, rec, now); err != nil {
				return nil, "", err
			}
			switch rec.Status {
			case record.StatusSucceeded, record.StatusFailed:
				res, err := e.replay(ctx, r, rec)
				if err == nil {
					e.tel.add(ctx, e.tel.replays, r)
				}
				return res, idemhttp.OutcomeReplayed, err
			case record.StatusPending:
				if ran || rec.LeaseExpiresAt.After(now) {
					// Waiting for the owner is not a lost race: no round.
					if waitForOwner(ctx, waitUntil, round) {
						continue
					}
					return nil, "", e.inProgress(r, rec, now)
				}
				ok, err := e.takeOver(ctx, r, rec, a, now)
				if err != nil {
					return nil, "", e.unavailable(r, err)
				}
				if !ok {
					round++
					continue
				}
			default:
				return nil, "", refusal.Errorf(CodeKeyReused, r.key,
					"idempotency key belongs to a row written outside the idempotency hook")
			}
		} else if ran {
			return nil, "", e.inProgress(r, nil, time.Time{})
		}
		end := e.run(ctx, a, next)
		if !end.again {
			return end.res, end.report, end.err
		}
		lost = end.lost
		ran = ran || end.ran
		round++
	}
	return nil, "", e.inProgress(r, nil, time.Time{})
}

// refuseRecord answers a request that a record of its key refuses: past
// retention, or made by a different request.
func (e *Extension) refuseRecord(r *request, rec *store.Record, now time.Time) error {
	if expired(rec, r.spec.retention, now) {
		return refusal.Errorf(CodeKeyExpired, r.key,
			"idempotency key expired: its result was kept for %v and is archived; the key will not run again, use a new key for a new intent",
			r.spec.retention)
	}
	if diffs := fingerprint.Differences(rec.Fingerprint, r.fingerprint); diffs != nil {
		return refusal.Errorf(CodeKeyReused, r.key,
			"idempotency key was first used for a different request: its %s; use a new key for a new intent",
			fingerprint.Describe(diffs))
	}
	return nil
}

// waitForOwner waits a while for the attempt that holds the key, until
// waitUntil (Config.WaitForInFlight), and reports whether to look again;
// false: answer IDEMPOTENCY_IN_PROGRESS now.
func waitForOwner(ctx context.Context, waitUntil time.Time, round int) bool {
	wait := time.Until(waitUntil)
	return wait > 0 && timer.Sleep(ctx, min(wait, pollInterval(round))) == nil
}

// takeOver gives rec, a pending record whose lease had run out by now, to
// a: it becomes the next attempt of the claim. It reports false when
// another request changed the record first.
func (e *Extension) takeOver(ctx context.Context, r *request, rec *store.Record, a *attempt, now time.Time) (bool, error) {
	// Detached from the request: a statement that commits while the
	// client goes away must still be seen as made.
	dctx, cancel := detached(ctx)
	start := time.Now()
	ok, err := e.store.TakeOver(dctx, store.TakeOver{Ref: r.ref(), Attempt: rec.Attempt, Now: now, LeaseUntil: a.claim.LeaseExpiresAt})
	cancel()
	e.tel.claimed(ctx, r, time.Since(start))
	if err != nil || !ok {
		return false, err
	}
	a.takenOver(rec)
	e.tel.add(ctx, e.tel.takeovers, r)
	trace.SpanFromContext(ctx).AddEvent("taken over", trace.WithAttributes(attrAttempt.Int(a.claim.Attempt)))
	e.log(ctx, slog.LevelInfo, "idempotency claim taken over", r, slog.Int("attempt", a.claim.Attempt))
	return true, nil
}

// expired reports whether a finished record is past its retention window:
// archived by the sweeper, or due to be.
func expired(rec *store.Record, retention time.Duration, now time.Time) bool {
	if !record.Finished(rec.Status) {
		return false
	}
	return !rec.ArchivedAt.IsZero() || !now.Before(rec.CompletedAt.Add(retention))
}

// lookup reads the record of r's key. Concurrent lookups of one key in
// this process share one statement: a burst of duplicates waiting for an
// attempt in flight reads the store once per poll, not once per duplicate,
// and so leaves the pool to the attempt itself and its lease renewals
// (which, starved, would let a duplicate take a live attempt over). A
// record read a moment before this request arrived is no risk: every
// decision taken on it is fenced by the statement that acts on it.
//
// The statement runs on the goroutine of the request that starts it
// (singleflight's would start one, whose stack grows through the driver,
// per lookup).
func (e *Extension) lookup(ctx context.Context, r *request) (*store.Record, store.Reading, error) {
	for {
		l, leader := e.lookups.join(r.id)
		if leader {
			// The statement runs under this request's context; the others
			// only wait for it.
			func() {
				defer e.lookups.done(r.id, l)
				l.val.err = errLookupUnfinished // what the others read if it panics
				l.val.rec, l.val.reading, l.val.err = e.store.Lookup(ctx, r.ref())
			}()
			return l.val.rec, l.val.reading, l.val.err
		}
		select {
		case <-ctx.Done():
			return nil, store.Reading{}, ctx.Err()
		case <-l.ready:
		}
		if err := l.val.err; err != nil && ctx.Err() == nil &&
			(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			continue // the request that ran it went away, this one has not: look again
		}
		return l.val.rec, l.val.reading, l.val.err
	}
}

// errLookupUnfinished is what the requests waiting for a shared lookup get
// when the statement did not return (it panicked).
var errLookupUnfinished = errors.New("idempotency lookup did not finish")

// lookedUp is what a shared lookup read (see Extension.lookup).
type lookedUp struct {
	rec     *store.Record
	reading store.Reading
	err     error
}

// pollInterval is the wait before the round-th look at a live pending
// claim.
func pollInterval(round int) time.Duration {
	return min(25*time.Millisecond<<min(round, 5), 500*time.Millisecond)
}

func (e *Extension) replay(ctx context.Context, r *request, rec *store.Record) (graphql.Marshaler, error) {
	stored, err := decodeResponse(rec.Response)
	if err != nil {
		return nil, e.unavailable(r, fmt.Errorf("stored response is unreadable: %w", err))
	}
	if stored.TooLarge > 0 {
		return nil, refusal.Errorf(CodeResponseNotStored, r.key,
			"the mutation ran once with this key, but its result (%d bytes) was too large to store, so it cannot be replayed; it will not run again", stored.TooLarge)
	}
	addErrors(ctx, stored.errorsAt(r.executed))
	return stored.marshaler(), nil
}

// unconfirmed answers a failure while storing the result: the commit may or
// may not have happened, which only a retry with the key can tell.
func (e *Extension) unconfirmed(r *request, err error) error {
	e.log(context.Background(), slog.LevelError, "idempotency store failed while storing a result", r, slog.Any("error", err))
	return refusal.Errorf(CodeUnavailable, r.key, "the idempotency store failed while storing the result; retry with the same key to get it, or to run the mutation again if it was not stored")
}

// inProgress answers a request whose key another attempt holds: rec, as
// read at now (nil when the request lost its rounds without a record).
func (e *Extension) inProgress(r *request, rec *store.Record, now time.Time) error {
	elapsed, leaseLeft := time.Duration(0), r.spec.lease
	if rec != nil {
		elapsed, leaseLeft = now.Sub(rec.ClaimedAt), rec.LeaseExpiresAt.Sub(now)
	}
	return &idemcode.Error{
		Code:       CodeInProgress,
		Key:        r.key,
		Message:    "a request with this idempotency key is still being processed; retry later with the same key",
		RetryAfter: r.spec.pace.retryAfter(elapsed, leaseLeft),
	}
}

// unavailable logs a store failure in full and returns the error clients
// see, which carries no database text. A statement that failed on text the
// database cannot store (store.ErrUnstorable) failed on the request's
// input, which the same request brings again: it is BAD_USER_INPUT, final,
// and no outage (text.go refuses such input before any database work; this
// is the backstop).
func (e *Extension) unavailable(r *request, err error) error {
	if store.Unstorable(err) {
		e.log(context.Background(), slog.LevelInfo, "the database refused text it cannot store; the client got BAD_USER_INPUT", r, slog.Any("error", err))
		return refusal.Errorf(CodeBadInput, r.key, "the mutation's input holds %s", document.UnstorableMessage)
	}
	level := slog.LevelError
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		level = slog.LevelInfo // the client went away: not the store's fault
	}
	e.log(context.Background(), level, "idempotency store unavailable", r, slog.Any("error", err))
	return refusal.Errorf(CodeUnavailable, r.key, "the idempotency store is unavailable; the mutation was not applied, retry with the same key")
}

// refuse answers the field with err and null.
func (e *Extension) refuse(ctx context.Context, r *request, err error) graphql.Marshaler {
	var ie *idemcode.Error
	if !errors.As(err, &ie) {
		ie = refusal.Errorf(CodeUnavailable, r.key, "the idempotency store is unavailable")
	}
	ge := refusal.GQL(ie)
	ge.Path = ast.Path{ast.PathName(r.alias)}
	if r.field.Position != nil {
		ge.Locations = []gqlerror.Location{{Line: r.field.Position.Line, Column: r.field.Position.Column}}
	}
	if ie.Code == CodeInProgress {
		operationFrom(ctx).inProgressFor(r.alias, ie.RetryAfter)
		e.tel.add(ctx, e.tel.inProgress, r)
	} else {
		e.tel.add(ctx, e.tel.refusals, r, attrCode.String(string(ie.Code)))
	}
	if ie.Code != CodeUnavailable {
		e.log(ctx, slog.LevelDebug, "idempotent mutation refused", r, slog.String("code", string(ie.Code)))
	}
	graphql.AddError(ctx, ge)
	return graphql.Null
}

func (e *Extension) log(ctx context.Context, level slog.Level, msg string, r *request, attrs ...slog.Attr) {
	attrs = append(attrs,
		slog.String("field", r.spec.name),
		slog.String("tenant", r.tenant),
		slog.String("key_hash", idemkey.Hash(r.key)))
	e.cfg.Logger.LogAttrs(ctx, level, msg, attrs...)
}

func addErrors(ctx context.Context, errs gqlerror.List) {
	for _, e := range errs {
		graphql.AddError(ctx, e)
	}
}
