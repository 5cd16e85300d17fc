package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/goovo/idem/internal/fingerprint"
	"github.com/goovo/idem/internal/store"
)

// maxRounds bounds how often one request looks the key up again after losing
// a race (a conflicting claim, a takeover by someone else, a lost lease).
const maxRounds = 5

// completionTimeout bounds the statements that tidy up after the client has
// gone away (release of a claim).
const completionTimeout = 5 * time.Second

// request is one idempotent field of one operation, validated.
type request struct {
	spec        *fieldSpec
	field       *ast.Field
	alias       string
	tenant      string
	key         string
	fingerprint string
}

// serve answers one idempotent mutation field.
func (e *Extension) serve(ctx context.Context, spec *fieldSpec, oc *graphql.OperationContext, field *ast.Field, next graphql.RootResolver) graphql.Marshaler {
	r := &request{spec: spec, field: field, alias: field.Alias}
	ctx, span := e.tel.startSpan(ctx, r)
	res, outcome, err := e.answer(ctx, r, oc, next)
	finishSpan(span, r, outcome, err)
	operationFrom(ctx).record(r.alias, r.key, outcome)
	if err != nil {
		return e.refuse(ctx, r, err)
	}
	return res
}

// answer validates the request, all before any database work, and runs the
// protocol.
func (e *Extension) answer(ctx context.Context, r *request, oc *graphql.OperationContext, next graphql.RootResolver) (graphql.Marshaler, string, error) {
	key, err := e.keyOf(ctx, oc, r.field)
	if r.spec.keyOptional && errors.Is(err, ErrKeyMissing) {
		return e.runKeyless(ctx, r, next)
	}
	if err != nil {
		return nil, OutcomeRefused, err
	}
	r.key = key
	if r.tenant, err = e.tenant(ctx, key); err != nil {
		return nil, OutcomeRefused, err
	}
	fp := fingerprint.Of(e.schema, e.schema.Mutation.Name, r.field, oc.Variables, KeyArgument)
	if fp.ArgumentsSize > e.cfg.MaxArgumentBytes {
		return nil, OutcomeRefused, errorf(CodeRequestTooLarge, key, "the mutation's arguments are %d bytes; the limit is %d", fp.ArgumentsSize, e.cfg.MaxArgumentBytes)
	}
	r.fingerprint = fp.String()
	res, outcome, err := e.run(ctx, r, next)
	if err != nil {
		outcome = OutcomeRefused
	}
	return res, outcome, err
}

// keyOf returns the field's key, from its argument or, with
// Config.KeyHeader, from the Idempotency-Key header, and validates it.
// MutateOperationContext has already refused a header that conflicts with
// the argument or names the key of several fields.
func (e *Extension) keyOf(ctx context.Context, oc *graphql.OperationContext, field *ast.Field) (string, error) {
	key, present, err := keyArgument(oc, field)
	if err != nil {
		return "", err
	}
	if !present && e.cfg.KeyHeader {
		if st := httpStateFrom(ctx); st != nil && st.hasRequestKey {
			key, present = st.requestKey, true
		}
	}
	if !present {
		where := KeyArgument
		if e.cfg.KeyHeader {
			where += " (or the " + HeaderKey + " header)"
		}
		return "", errorf(CodeKeyMissing, "", "%s is required: send one key per intent and reuse it on every retry", where)
	}
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return key, nil
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
		return "", false, errorf(CodeKeyInvalid, "", "%s must be a string", KeyArgument)
	}
	if v == nil {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, errorf(CodeKeyInvalid, "", "%s must be a string", KeyArgument)
	}
	return s, true, nil
}

// ValidateKey checks a key the way the hook does before any database work:
// 1 to MaxKeyLength characters of printable ASCII.
func ValidateKey(key string) error {
	if key == "" {
		return errorf(CodeKeyInvalid, key, "idempotency key is empty")
	}
	if len(key) > MaxKeyLength {
		return errorf(CodeKeyInvalid, "", "idempotency key is %d bytes long; the limit is %d", len(key), MaxKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return errorf(CodeKeyInvalid, "", "idempotency key has a character that is not printable ASCII at byte %d", i)
		}
	}
	return nil
}

func (e *Extension) tenant(ctx context.Context, key string) (string, error) {
	t, err := e.cfg.Tenant(ctx)
	if err != nil || t == "" {
		return "", errorf(CodeUnauthenticated, key, "the request has no authenticated tenant")
	}
	return t, nil
}

// run is the protocol: claim the key, or look it up and replay, refuse or
// take it over, and look again whenever a race was lost.
//
// On PostgreSQL the first round claims without looking first: for a new key
// (the common case) the insert is the lookup, and saves a round trip. When
// the key exists the insert changes nothing and the lookup follows, so a
// retry of a finished key pays instead: two statements where a lookup alone
// would do in lease mode; in atomic mode, where the claim sits in the
// transaction, begin, the insert and rollback before the lookup. Retries are
// the exception, and a concurrent duplicate in atomic mode needs the
// transaction anyway, to wait on the unique index for the first attempt.
// On SQLite a duplicate's insert would wait for the database's single write
// lock, which the first attempt holds until it commits, where a lookup (a
// read) answers at once.
func (e *Extension) run(ctx context.Context, r *request, next graphql.RootResolver) (graphql.Marshaler, string, error) {
	db := e.cfg.Backend.DB()
	waitUntil := time.Now().Add(e.cfg.WaitForInFlight)
	claimFirst := e.store.Dialect() == store.Postgres
	ran := false // this request already ran the resolver once
	for round := 0; round < maxRounds; {
		var (
			rec   *store.Record
			clock store.Clock
			err   error
		)
		if claimFirst {
			claimFirst = false
			clock, err = e.store.Now(ctx, db)
		} else {
			rec, clock, err = e.store.Lookup(ctx, db, r.spec.table, r.tenant, r.key)
		}
		if err != nil {
			return nil, "", e.unavailable(r, err)
		}
		now := clock.Now()
		// What this request will run as, if it runs: a fresh claim, unless
		// it takes an expired one over below.
		attempt, insert, claimedAt, leaseUntil := 1, true, now, now.Add(r.spec.lease)
		if rec != nil {
			if expired(rec, r.spec.retention, now) {
				return nil, "", errorf(CodeKeyExpired, r.key,
					"idempotency key expired: its result was kept for %v and is archived; the key will not run again, use a new key for a new intent",
					r.spec.retention)
			}
			if diffs := fingerprint.Differences(rec.Fingerprint, r.fingerprint); diffs != nil {
				return nil, "", errorf(CodeKeyReused, r.key,
					"idempotency key was first used for a different request: its %s differ; use a new key for a new intent",
					strings.Join(diffs, " and "))
			}
			switch rec.Status {
			case store.StatusSucceeded, store.StatusFailed:
				res, err := e.replay(ctx, r, rec)
				if err == nil {
					e.tel.add(ctx, e.tel.replays, r)
				}
				return res, OutcomeReplayed, err
			case store.StatusPending:
				if ran || rec.LeaseExpiresAt.After(now) {
					if wait := time.Until(waitUntil); wait > 0 {
						// Waiting for the owner is not a lost race: no round.
						if err := sleep(ctx, min(wait, pollInterval(round))); err != nil {
							return nil, "", e.inProgress(r, rec.LeaseExpiresAt.Sub(now))
						}
						continue
					}
					return nil, "", e.inProgress(r, rec.LeaseExpiresAt.Sub(now))
				}
				// Detached from the request: a statement that commits while the
				// client goes away must still be seen as made.
				dctx, cancel := detached(ctx)
				start := time.Now()
				ok, err := e.store.TakeOver(dctx, db, r.spec.table, r.tenant, r.key, rec.Attempt, now, leaseUntil)
				cancel()
				e.tel.claimed(ctx, r, time.Since(start))
				if err != nil {
					return nil, "", e.unavailable(r, err)
				}
				if !ok {
					round++
					continue
				}
				attempt, insert, claimedAt = rec.Attempt+1, false, rec.ClaimedAt
				e.tel.add(ctx, e.tel.takeovers, r)
				trace.SpanFromContext(ctx).AddEvent("taken over", trace.WithAttributes(attrAttempt.Int(attempt)))
				e.log(ctx, slog.LevelInfo, "idempotency claim taken over", r, slog.Int("attempt", attempt))
			default:
				return nil, "", errorf(CodeKeyReused, r.key,
					"idempotency key belongs to a row written outside the idempotency hook")
			}
		} else if ran {
			return nil, "", e.inProgress(r, r.spec.lease)
		}
		out := e.execute(ctx, r, &claimState{attempt: attempt, insert: insert, claimedAt: claimedAt, leaseUntil: leaseUntil}, clock, next)
		if !out.again {
			return out.res, out.report, out.err
		}
		ran = ran || out.ran
		round++
	}
	return nil, "", e.inProgress(r, time.Second)
}

// expired reports whether a finished record is past its retention window:
// archived by the sweeper, or due to be.
func expired(rec *store.Record, retention time.Duration, now time.Time) bool {
	if rec.Status != store.StatusSucceeded && rec.Status != store.StatusFailed {
		return false
	}
	return !rec.ArchivedAt.IsZero() || !now.Before(rec.CompletedAt.Add(retention))
}

func pollInterval(round int) time.Duration {
	return min(25*time.Millisecond<<min(round, 5), 500*time.Millisecond)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// outcome is the result of one execution attempt.
type outcome struct {
	res    graphql.Marshaler
	report string // OutcomeExecuted or OutcomeReleased
	err    error
	again  bool // look the key up again
	ran    bool // the resolver ran (its writes were rolled back)
}

// claimState is the claim an execution runs under.
type claimState struct {
	attempt    int
	insert     bool // a fresh claim, to insert; else one taken over
	claimedAt  time.Time
	leaseUntil time.Time
}

// execute runs the resolver once under the claim and stores its result.
func (e *Extension) execute(ctx context.Context, r *request, cs *claimState, clock store.Clock, next graphql.RootResolver) outcome {
	attempt, insert := cs.attempt, cs.insert
	c := &call{
		ext:    e,
		req:    r,
		field:  r.field,
		insert: insert,
		clock:  clock,
		claim: &Claim{
			Tenant:         r.tenant,
			Key:            r.key,
			Table:          r.spec.table.Name,
			Fingerprint:    r.fingerprint,
			Attempt:        attempt,
			Mode:           r.spec.mode,
			ClaimedAt:      cs.claimedAt,
			LeaseExpiresAt: cs.leaseUntil,
		},
	}
	fieldCtx := graphql.WithFreshResponseContext(withCall(withClaim(ctx, c.claim), c))
	res := next(fieldCtx)
	c.stopHeartbeat()
	errs := graphql.GetErrors(fieldCtx)

	if c.tx == nil {
		// The resolver did not run: nothing was written but, perhaps, the
		// claim.
		if !insert || c.claimed {
			e.release(ctx, r, attempt)
		}
		switch {
		case c.conflict:
			return outcome{again: true}
		case c.storeErr != nil:
			return outcome{err: e.unavailable(r, c.storeErr)}
		case c.inputErr != nil:
			return outcome{err: c.inputErr}
		}
		// gqlgen refused the field before its resolver (argument coercion):
		// the same request would be refused again.
		addErrors(ctx, errs)
		return outcome{res: res, report: OutcomeRefused}
	}

	if c.retryable || len(errs) > c.finals || ctx.Err() != nil {
		// A transient failure: undo everything, free the key for a retry.
		c.rollback(ctx)
		e.release(ctx, r, attempt)
		e.tel.add(ctx, e.tel.failures, r, attrFailure.String("retryable"))
		e.log(ctx, slog.LevelInfo, "idempotent mutation failed with a retryable error; claim released", r, slog.Int("attempt", attempt))
		addErrors(ctx, errs)
		return outcome{res: graphql.Null, report: OutcomeReleased}
	}

	status := store.StatusSucceeded
	if len(errs) > 0 {
		status = store.StatusFailed
	}
	answer, response, tooLarge, err := encodeResponse(res, errs, e.cfg.MaxResponseBytes)
	if err != nil {
		c.rollback(ctx)
		e.release(ctx, r, attempt)
		return outcome{err: e.unavailable(r, err)}
	}
	ok, err := c.complete(ctx, status, response)
	if err != nil {
		// The release is fenced: if the commit did happen after all, it
		// changes nothing, and the retry replays the result.
		e.release(ctx, r, attempt)
		return outcome{err: e.unconfirmed(r, err)}
	}
	if !ok {
		// Another attempt took the claim over while this one ran: its result
		// is the only one; this attempt's writes are rolled back.
		e.log(ctx, slog.LevelWarn, "idempotent attempt lost its claim; its writes were rolled back", r, slog.Int("attempt", attempt))
		return outcome{again: true, ran: true}
	}
	e.tel.responseSize.Record(ctx, int64(len(response)), metric.WithAttributes(attrField.String(r.spec.name)))
	if status == store.StatusFailed {
		e.tel.add(ctx, e.tel.failures, r, attrFailure.String("final"))
	}
	if tooLarge > 0 {
		e.log(ctx, slog.LevelWarn, "idempotent mutation's result exceeds Config.MaxResponseBytes and was not stored; retries get IDEMPOTENCY_RESPONSE_NOT_STORED",
			r, slog.Int("bytes", tooLarge))
	}
	addErrors(ctx, errs)
	return outcome{res: answer.marshaler(), report: OutcomeExecuted}
}

// detached returns a context for a statement that must run to its end even
// when the client has gone away: one that commits by itself, whose outcome
// the protocol must know.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), completionTimeout)
}

// release ends the lease of a claim whose attempt will not complete, so that
// a retry takes it over at once. It runs even when the client has gone away.
// A release is fenced, so trying again is always safe, and worth it: a claim
// left behind blocks its key until its lease runs out. When the first tries
// fail (a pooled connection broken by a cancelled request; a row lock on
// PostgreSQL; on SQLite, other transactions holding the write lock past the
// busy timeout), release answers and goes on trying in the background until
// the lease would have run out anyway.
func (e *Extension) release(ctx context.Context, r *request, attempt int) {
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
func (e *Extension) tryRelease(ctx context.Context, r *request, attempt int) error {
	var err error
	for try := range 3 {
		var clock store.Clock
		if clock, err = e.store.Now(ctx, e.cfg.Backend.DB()); err == nil {
			err = e.store.Release(ctx, e.cfg.Backend.DB(), r.spec.table, r.tenant, r.key, attempt, clock.Now())
		}
		if err == nil || sleep(ctx, time.Duration(try+1)*50*time.Millisecond) != nil {
			break
		}
	}
	return err
}

func (e *Extension) replay(ctx context.Context, r *request, rec *store.Record) (graphql.Marshaler, error) {
	stored, err := decodeResponse(rec.Response)
	if err != nil {
		return nil, e.unavailable(r, fmt.Errorf("stored response is unreadable: %w", err))
	}
	if stored.TooLarge > 0 {
		return nil, errorf(CodeResponseNotStored, r.key,
			"the mutation ran once with this key, but its result (%d bytes) was too large to store, so it cannot be replayed; it will not run again", stored.TooLarge)
	}
	addErrors(ctx, stored.errorsAt(r.alias))
	return stored.marshaler(), nil
}

// unconfirmed answers a failure while storing the result: the commit may or
// may not have happened, which only a retry with the key can tell.
func (e *Extension) unconfirmed(r *request, err error) error {
	e.log(context.Background(), slog.LevelError, "idempotency store failed while storing a result", r, slog.Any("error", err))
	return errorf(CodeUnavailable, r.key, "the idempotency store failed while storing the result; retry with the same key to get it, or to run the mutation again if it was not stored")
}

func (e *Extension) inProgress(r *request, remaining time.Duration) error {
	return &Error{
		Code:       CodeInProgress,
		Key:        r.key,
		Message:    "a request with this idempotency key is still being processed; retry later with the same key",
		RetryAfter: remaining,
	}
}

// unavailable logs a store failure in full and returns the error clients
// see, which carries no database text.
func (e *Extension) unavailable(r *request, err error) error {
	level := slog.LevelError
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		level = slog.LevelInfo // the client went away: not the store's fault
	}
	e.log(context.Background(), level, "idempotency store unavailable", r, slog.Any("error", err))
	return errorf(CodeUnavailable, r.key, "the idempotency store is unavailable; the mutation was not applied, retry with the same key")
}

// refuse answers the field with err and null.
func (e *Extension) refuse(ctx context.Context, r *request, err error) graphql.Marshaler {
	var ie *Error
	if !errors.As(err, &ie) {
		ie = errorf(CodeUnavailable, r.key, "the idempotency store is unavailable")
	}
	ge := ie.gqlError()
	ge.Path = ast.Path{ast.PathName(r.alias)}
	if r.field.Position != nil {
		ge.Locations = []gqlerror.Location{{Line: r.field.Position.Line, Column: r.field.Position.Column}}
	}
	if ie.Code == CodeInProgress {
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
		slog.String("key_hash", KeyHash(r.key)))
	e.cfg.Logger.LogAttrs(ctx, level, msg, attrs...)
}

// KeyHash is how keys appear in logs: the first 12 hex digits of their
// SHA-256, enough to correlate log lines without revealing the key.
func KeyHash(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

func addErrors(ctx context.Context, errs gqlerror.List) {
	for _, e := range errs {
		graphql.AddError(ctx, e)
	}
}

// call is the state one execution shares between the root interceptor, the
// field interceptor and the resolver.
type call struct {
	ext    *Extension
	req    *request
	field  *ast.Field // the root field: InterceptField claims when it reaches it
	claim  *Claim
	insert bool // a fresh claim to insert (else one taken over)
	clock  store.Clock

	// Set by begin, on the resolver's goroutine, before the resolver runs.
	started  bool
	claimed  bool // this call inserted the claim (lease mode)
	conflict bool // the key was taken between the lookup and the claim
	storeErr error
	inputErr error
	tx       Tx

	// stop ends the lease renewals, if any (see stopHeartbeat); set by
	// begin.
	stop func()

	// Set by the field tree, whose resolvers may run concurrently.
	mu        sync.Mutex
	retryable bool
	finals    int
}

type callKey struct{}

func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

func callFrom(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// errNotRun ends a field whose claim or transaction could not be made; the
// root interceptor answers for it (and drops this error). A new error each
// time: gqlgen writes the field's path and location into it.
func errNotRun() error { return &gqlerror.Error{Message: "idempotent mutation did not run"} }

// begin claims the key (unless it was taken over already) and opens the
// transaction the resolver's writes go into. In lease mode the claim commits
// first, by itself; in atomic mode it is the transaction's first write, and a
// savepoint after it lets a final error roll back the resolver's writes but
// keep the claim.
func (c *call) begin(ctx context.Context, args map[string]any) (context.Context, error) {
	e := c.ext
	if c.claim.Mode == ModeLease {
		if c.insert {
			// The claim commits by itself: detached from the request, so
			// that a client going away cannot leave it committed but
			// unknown to us (and so unreleased).
			dctx, cancel := detached(ctx)
			claimed := c.insertClaim(dctx, nil, args)
			cancel()
			if !claimed {
				return ctx, errNotRun()
			}
			c.claimed = true
		}
		txCtx, tx, err := e.cfg.Backend.BeginTx(ctx)
		if err != nil {
			c.storeErr = &store.Error{Op: "begin", Err: err}
			return ctx, errNotRun()
		}
		c.tx = tx
		c.startHeartbeat(ctx)
		return txCtx, nil
	}
	txCtx, tx, err := e.cfg.Backend.BeginTx(ctx)
	if err != nil {
		c.storeErr = &store.Error{Op: "begin", Err: err}
		return ctx, errNotRun()
	}
	if c.insert && !c.insertClaim(txCtx, tx, args) {
		_ = tx.Rollback()
		return ctx, errNotRun()
	}
	if err := e.store.Savepoint(txCtx, tx); err != nil {
		_ = tx.Rollback()
		c.storeErr = err
		return ctx, errNotRun()
	}
	c.tx = tx
	return txCtx, nil
}

// startHeartbeat renews the lease every third of its length while the
// resolver runs, so that a live attempt that runs longer than its lease is
// not taken over (and fenced out) by every retry: only a dead attempt's
// lease runs out. On SQLite a live attempt holds the write lock, which a
// takeover needs too, so there is nothing to renew.
func (c *call) startHeartbeat(ctx context.Context) {
	e, r := c.ext, c.req
	if e.store.Dialect() != store.Postgres {
		return
	}
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
			// transaction holds: stop cancels it.
			ok, err := e.store.Renew(hctx, e.cfg.Backend.DB(), r.spec.table, r.tenant, r.key, c.claim.Attempt, c.clock.Now().Add(r.spec.lease))
			if hctx.Err() != nil || (err == nil && !ok) {
				return // stopped, or the claim is lost: completion will be fenced
			}
			if err != nil {
				e.log(ctx, slog.LevelWarn, "could not renew the idempotency lease", r, slog.Any("error", err))
			}
		}
	}()
	c.stop = func() {
		cancel()
		<-done
	}
}

// stopHeartbeat ends the renewals and waits for the last one.
func (c *call) stopHeartbeat() {
	if c.stop != nil {
		c.stop()
	}
}

// insertClaim inserts the claim row and records why it did not, if it did
// not.
func (c *call) insertClaim(ctx context.Context, tx Tx, args map[string]any) bool {
	start := time.Now()
	ok, err := c.req.spec.records.Insert(ctx, tx, c.claim, args)
	tel := c.ext.tel
	tel.claimed(ctx, c.req, time.Since(start))
	if err == nil && ok {
		tel.add(ctx, tel.claims, c.req, attrMode.String(string(c.claim.Mode)))
		trace.SpanFromContext(ctx).AddEvent("claimed")
	}
	var in *inputError
	switch {
	case errors.As(err, &in):
		c.inputErr = errorf(CodeBadInput, c.claim.Key, "%s", in.message)
	case err != nil:
		c.storeErr = &store.Error{Op: "claim", Err: err}
	case !ok:
		c.conflict = true
	}
	return err == nil && ok
}

// observe classifies a resolver error (or panic) of the field's tree.
func (c *call) observe(err error, panicked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if panicked || !IsFinal(err) {
		c.retryable = true
		return
	}
	c.finals++
}

func (c *call) rollback(ctx context.Context) {
	if err := c.tx.Rollback(); err != nil && !errors.Is(err, context.Canceled) {
		c.ext.log(ctx, slog.LevelDebug, "rollback failed", c.req, slog.Any("error", err))
	}
}

// complete stores the result, fenced by the attempt, and commits. A failed
// result keeps the claim's row but none of the resolver's writes.
func (c *call) complete(ctx context.Context, status string, response []byte) (bool, error) {
	e, r := c.ext, c.req
	var exec store.Executor = c.tx
	if status == store.StatusFailed {
		if c.claim.Mode == ModeLease {
			c.rollback(ctx)
			exec = e.cfg.Backend.DB()
			var cancel context.CancelFunc
			ctx, cancel = detached(ctx)
			defer cancel()
		} else if err := e.store.RollbackToSavepoint(ctx, c.tx); err != nil {
			c.rollback(ctx)
			return false, err
		}
	}
	ok, err := e.store.Complete(ctx, exec, r.spec.table, r.tenant, r.key, c.claim.Attempt, status, response, c.clock.Now())
	if err != nil || !ok {
		if exec == c.tx {
			c.rollback(ctx)
		}
		return false, err
	}
	if exec == c.tx {
		if err := c.tx.Commit(); err != nil {
			return false, &store.Error{Op: "commit", Err: err}
		}
	}
	return true, nil
}
