package engine

// Settling a key: read its record, ask the protocol's decision table
// (protocol.Decide) what to do with it, and do it. The table decides;
// this file carries decisions out against the store.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"go.opentelemetry.io/otel/trace"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/document"
	"github.com/goovo/idem/internal/fingerprint"
	"github.com/goovo/idem/internal/protocol"
	"github.com/goovo/idem/internal/record"
	"github.com/goovo/idem/internal/refusal"
	"github.com/goovo/idem/internal/store"
	"github.com/goovo/idem/internal/timer"
)

// maxRounds bounds how often one request looks the key up again after losing
// a race (a conflicting claim, a takeover by someone else, a lost lease).
const maxRounds = 5

// sight is the record of a key as a request saw it: the record (nil: the
// key has none), the database clock of the read, and the database time
// the request decided at.
type sight struct {
	rec     *record.Record
	reading store.Reading
	now     time.Time
}

// settle answers r: it claims the key, or replays, refuses, waits for, or
// takes over the record that holds it. Each round reads the record (or
// takes what the last claim read when it lost), decides (decide), and
// carries the decision out; a race lost to another request (a claim that
// found the key taken, a takeover or a completion fenced out) costs a
// round, and after maxRounds the request is answered
// IDEMPOTENCY_IN_PROGRESS. queued: r waited behind an identical request of
// this process (admit).
func (e *Engine) settle(ctx context.Context, r *request, queued bool, next graphql.RootResolver) (graphql.Marshaler, fieldOutcome, error) {
	waitUntil := time.Now().Add(e.cfg.WaitForInFlight)
	var seen *sight // what the next round decides on; nil: look the key up
	if !e.looksFirst(ctx, r, queued) {
		// Claim first: the claim's insert is the lookup (decided on below
		// as a key without a record).
		reading, err := e.store.Now(ctx)
		if err != nil {
			return nil, outcomeRefused, e.unavailable(r, err)
		}
		seen = &sight{reading: reading, now: reading.Now()}
	}
	ran := false // this request already ran the mutation once
	for round := 0; round < maxRounds; round++ {
		var (
			d   protocol.Decision
			err error
		)
		seen, d, err = e.decide(ctx, r, seen, ran, waitUntil, round)
		if err != nil {
			return nil, outcomeRefused, e.unavailable(r, err)
		}
		var end ended
		switch d.Kind {
		case protocol.Replay:
			res, err := e.replay(ctx, r, seen.rec)
			if err == nil {
				e.tel.add(ctx, e.tel.replays, r)
			}
			return res, outcomeReplayed, err
		case protocol.Refuse:
			return nil, outcomeRefused, e.keyRefusal(r, d, seen.rec)
		case protocol.InProgress:
			return nil, outcomeRefused, e.inProgress(r, seen.rec, seen.now)
		case protocol.Claim:
			end = e.claim(ctx, r, seen, next)
		case protocol.TakeOver:
			a := e.newAttempt(r, seen)
			ok, err := e.takeOver(ctx, r, seen, a)
			if err != nil {
				return nil, outcomeRefused, e.unavailable(r, err)
			}
			if !ok {
				seen = nil // another request changed the record first: look again
				continue
			}
			end = e.run(ctx, a, next)
		}
		switch end.kind {
		case answered:
			return end.res, end.outcome, end.err
		case fencedOut:
			ran, seen = true, nil // look again
		case claimLost:
			seen = end.lost // decide on what the claim that lost read
		}
	}
	return nil, outcomeRefused, e.inProgress(r, nil, time.Time{})
}

// looksFirst reports whether r reads its key's record before claiming it.
//
// Where the store's claim doubles as its lookup (Traits.ClaimFirst), a
// request claims without looking first: for a new key (the common case)
// the insert is the lookup, and saves a round trip. When the key exists
// the insert changes nothing and the claim reads the record that holds it,
// so a retry of a finished key pays instead: two statements where a lookup
// alone would do in lease mode; in atomic mode, where the claim sits in
// the transaction, begin, the insert and rollback before the lookup.
// Retries are the exception, and a concurrent duplicate in atomic mode
// needs the transaction anyway, to wait on the unique index for the first
// attempt.
//
// A request whose key most likely has a record already looks first all
// the same: one that queued behind an identical request of this process
// (admit), which has most likely claimed and finished the key (the
// duplicates of a burst, let go together, then share one lookup instead
// of each sending a claim that writes nothing); one whose record this
// process has seen finished (finishedRecords); and one whose client says
// it is a retry (idemcode.HeaderRetry), which most often reaches a process
// that has not seen the key. The lookup decides nothing by itself: what it
// reads is what a claim that lost would have read, and a key it finds
// unknown is claimed as usual.
func (e *Engine) looksFirst(ctx context.Context, r *request, queued bool) bool {
	return !e.store.Traits().ClaimFirst || queued || e.finished.has(r.id) || retried(ctx)
}

// decide returns the decision of a round on the record of r's key: on
// seen, or, when seen is nil, on a lookup. While the decision is to wait
// for the attempt that holds the key (until waitUntil,
// Config.WaitForInFlight), it polls, and decides again on what it reads:
// waiting is no lost race, and costs no round. A wait that the request's
// end cuts short is answered IDEMPOTENCY_IN_PROGRESS.
func (e *Engine) decide(ctx context.Context, r *request, seen *sight, ran bool, waitUntil time.Time, round int) (*sight, protocol.Decision, error) {
	for {
		if seen == nil {
			rec, reading, err := e.lookup(ctx, r)
			if err != nil {
				return nil, protocol.Decision{}, err
			}
			seen = &sight{rec: rec, reading: reading, now: reading.Now()}
		}
		wait := time.Until(waitUntil)
		d := protocol.Decide(seen.rec, protocol.Request{Fingerprint: r.fingerprint, Retention: e.retentionOf(r.spec, seen.rec), Ran: ran, MayWait: wait > 0}, seen.now)
		if d.Kind != protocol.Wait {
			return seen, d, nil
		}
		if timer.Sleep(ctx, min(wait, pollInterval(round))) != nil {
			return seen, protocol.Decision{Kind: protocol.InProgress}, nil
		}
		seen = nil
	}
}

// claim claims r's key and runs the mutation as attempt 1. The claim's
// insert (INSERT … ON CONFLICT DO NOTHING, generated code) needs the
// field's typed arguments, which exist once gqlgen reaches the resolver:
// run calls gqlgen, whose field interceptor makes the claim there
// (InterceptField → attempt.begin → mode.begin → attempt.insertClaim), by
// itself in lease mode, as its transaction's first statement in atomic
// mode. A claim that finds the key taken ends the attempt with what it
// read (claimLost), and settle decides on that.
func (e *Engine) claim(ctx context.Context, r *request, seen *sight, next graphql.RootResolver) ended {
	return e.run(ctx, e.newAttempt(r, seen), next)
}

// keyRefusal is the error of a Refuse decision on rec: the key is
// another's, expired, or reused.
func (e *Engine) keyRefusal(r *request, d protocol.Decision, rec *record.Record) error {
	switch {
	case d.Code == idemcode.KeyForbidden:
		return refusal.Errorf(idemcode.KeyForbidden, r.key,
			"idempotency key belongs to another caller; use a key of your own (a new one for every intent)")
	case d.Code == idemcode.KeyExpired:
		retention := e.retentionOf(r.spec, rec)
		r.expiresAt = protocol.ExpiresAt(rec, retention)
		return refusal.Errorf(idemcode.KeyExpired, r.key,
			"idempotency key expired: its result was kept for %s (until %s) and is no longer replayed; the key will not run again, use a new key for a new intent",
			humanDuration(r.expiresAt.Sub(rec.CompletedAt)), r.expiresAt.UTC().Format(time.RFC3339))
	case d.Foreign:
		return refusal.Errorf(idemcode.KeyReused, r.key,
			"idempotency key belongs to a row written outside the idempotency hook")
	}
	return refusal.Errorf(idemcode.KeyReused, r.key,
		"idempotency key was first used for a different request: its %s; %s",
		fingerprint.Describe(d.Differences), fingerprint.Advice(d.Differences))
}

// takeOver gives the record seen, pending and its lease run out, to a: it
// becomes the next attempt of the claim. It reports false when another
// request changed the record first.
func (e *Engine) takeOver(ctx context.Context, r *request, seen *sight, a *attempt) (bool, error) {
	// Detached from the request: a statement that commits while the
	// client goes away must still be seen as made.
	dctx, cancel := detached(ctx)
	start := time.Now()
	ok, err := e.store.TakeOver(dctx, store.TakeOver{Ref: r.ref(), Attempt: seen.rec.Attempt, Now: seen.now, LeaseUntil: a.claim.LeaseExpiresAt})
	cancel()
	e.tel.claimed(ctx, r, time.Since(start))
	if err != nil || !ok {
		return false, err
	}
	a.takenOver(seen.rec)
	e.tel.add(ctx, e.tel.takeovers, r)
	trace.SpanFromContext(ctx).AddEvent("taken over", trace.WithAttributes(attrAttempt.Int(a.claim.Attempt)))
	e.log(ctx, slog.LevelInfo, "idempotency claim taken over", r, slog.Int("attempt", a.claim.Attempt))
	return true, nil
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
func (e *Engine) lookup(ctx context.Context, r *request) (*record.Record, store.Reading, error) {
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

// lookedUp is what a shared lookup read (see Engine.lookup).
type lookedUp struct {
	rec     *record.Record
	reading store.Reading
	err     error
}

// pollInterval is the wait before the round-th look at a live pending
// claim.
func pollInterval(round int) time.Duration {
	return min(25*time.Millisecond<<min(round, 5), 500*time.Millisecond)
}

func (e *Engine) replay(ctx context.Context, r *request, rec *record.Record) (graphql.Marshaler, error) {
	r.expiresAt = protocol.ExpiresAt(rec, e.retentionOf(r.spec, rec))
	stored, err := decodeResponse(rec.Response)
	if err != nil {
		return nil, e.unavailable(r, fmt.Errorf("stored response is unreadable: %w", err))
	}
	if stored.TooLarge > 0 {
		return nil, refusal.Errorf(idemcode.ResponseNotStored, r.key,
			"the mutation ran once with this key, but its result (%d bytes) was too large to store, so it cannot be replayed; it will not run again", stored.TooLarge)
	}
	addErrors(ctx, stored.errorsAt(r.executed))
	return stored.marshaler(), nil
}

// unconfirmed answers a failure while storing the result: the commit may or
// may not have happened, which only a retry with the key can tell.
func (e *Engine) unconfirmed(r *request, err error) error {
	e.log(context.Background(), slog.LevelError, "idempotency store failed while storing a result", r, slog.Any("error", err))
	return refusal.Errorf(idemcode.Unavailable, r.key, "the idempotency store failed while storing the result; retry with the same key to get it, or to run the mutation again if it was not stored")
}

// inProgress answers a request whose key another attempt holds: rec, as
// read at now (nil when the request lost its rounds without a record).
func (e *Engine) inProgress(r *request, rec *record.Record, now time.Time) error {
	elapsed, leaseLeft := time.Duration(0), r.spec.lease
	if rec != nil {
		elapsed, leaseLeft = now.Sub(rec.ClaimedAt), rec.LeaseExpiresAt.Sub(now)
	}
	return &idemcode.Error{
		Code:       idemcode.InProgress,
		Key:        r.key,
		Message:    "a request with this idempotency key is still being processed; retry later with the same key",
		RetryAfter: r.spec.pace.retryAfter(elapsed, leaseLeft),
	}
}

// unavailable logs a store failure in full and returns the error clients
// see, which carries no database text. A statement that failed on text the
// database cannot store (store.ErrUnstorable) failed on the request's
// input, which the same request brings again: it is BAD_USER_INPUT, final,
// and no outage (internal/document refuses such input before any database
// work; this is the backstop).
func (e *Engine) unavailable(r *request, err error) error {
	if store.Unstorable(err) {
		e.log(context.Background(), slog.LevelInfo, "the database refused text it cannot store; the client got BAD_USER_INPUT", r, slog.Any("error", err))
		return refusal.Errorf(idemcode.BadUserInput, r.key, "the mutation's input holds %s", document.UnstorableMessage)
	}
	level := slog.LevelError
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		level = slog.LevelInfo // the client went away: not the store's fault
	}
	e.log(context.Background(), level, "idempotency store unavailable", r, slog.Any("error", err))
	return refusal.Errorf(idemcode.Unavailable, r.key, "the idempotency store is unavailable; the mutation was not applied, retry with the same key")
}
