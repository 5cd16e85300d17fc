package engine

// The recoverer (Config.RecoverAfter): one more client of the protocol. It
// lists claims still pending long after their lease ran out, and sends
// each claim's stored operation (operation.go) through the server's own
// handler as its tenant: the hook then settles the key as for any retry
// (a fenced takeover, so that of several processes one runs it, then the
// resolver, then the result stored with its writes). What it cannot run
// by the retention horizon it takes over and stores as failed with
// IDEMPOTENCY_ABANDONED: the same two statements a retry's attempt makes.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/metric"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/fingerprint"
	"github.com/goovo/idem/internal/idemkey"
	"github.com/goovo/idem/internal/record"
	"github.com/goovo/idem/internal/refusal"
	"github.com/goovo/idem/internal/reqstate"
	"github.com/goovo/idem/internal/store"
	"github.com/goovo/idem/internal/timer"
)

// recoverBatch bounds the claims one round of the recoverer takes on per
// table.
const recoverBatch = 100

// maxRecoverBackoff bounds how long a claim whose run failed waits before
// the next.
const maxRecoverBackoff = time.Hour

// RecoverReport is what one round of the recoverer did.
type RecoverReport struct {
	// Recovered claims were run to a stored result; Compensated counts
	// those whose result is a final error.
	Recovered, Compensated int
	// Abandoned claims were stored as failed with IDEMPOTENCY_ABANDONED.
	Abandoned int
	// Waiting claims are left for a later round, at the back of the
	// list: their run failed or was refused, or their next try is not
	// due yet. (A claim that cannot be run at all is not listed before
	// the horizon.)
	Waiting int
}

// maxRecoveryRetries bounds the recoverer's memory of failed runs. An
// entry is dropped when this process recovers, abandons or sees replayed
// its claim; one that another process finished, or a sweep archived, is
// never seen again, so past the bound the entries whose claims were
// longest due are forgotten: at worst such a claim, if it is still there,
// is tried again without waiting its backoff.
const maxRecoveryRetries = 10_000

// recovery is the recoverer's memory, in this process: when each claim
// whose run failed may be tried again.
type recovery struct {
	mu      sync.Mutex
	handler http.Handler
	retries map[string]*recoveryRetry // by table, tenant and key
}

type recoveryRetry struct {
	failures int
	next     time.Time // database time
}

// setHandler records the handler the recoverer sends operations through
// (the first one SetHandler gives).
func (r *recovery) setHandler(h http.Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.handler == nil {
		r.handler = h
	}
}

func (r *recovery) getHandler() http.Handler {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handler
}

// due reports whether the claim named id may run at now.
func (r *recovery) due(id string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := r.retries[id]
	return rt == nil || !now.Before(rt.next)
}

// failed schedules the next run of the claim named id, twice as far each
// time.
func (r *recovery) failed(id string, now time.Time, after time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.retries == nil {
		r.retries = map[string]*recoveryRetry{}
	}
	rt := r.retries[id]
	if rt == nil {
		if len(r.retries) >= maxRecoveryRetries {
			r.forgetLongestDue(len(r.retries) / 10)
		}
		rt = &recoveryRetry{}
		r.retries[id] = rt
	}
	rt.failures++
	rt.next = now.Add(min(after<<min(rt.failures, 16), maxRecoverBackoff))
}

// SetHandler gives the recoverer the server's handler, which it sends the
// operations of abandoned claims through (idem.Hook.Handler's, middleware
// included).
func (e *Engine) SetHandler(h http.Handler) { e.recovery.setHandler(h) }

// forgetLongestDue drops the n entries whose next run was due first: a
// tenth of the map each time it is full, so that the scan is paid once
// every maxRecoveryRetries/10 failures.
func (r *recovery) forgetLongestDue(n int) {
	ids := make([]string, 0, len(r.retries))
	for id := range r.retries {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return r.retries[a].next.Compare(r.retries[b].next) })
	for _, id := range ids[:min(max(n, 1), len(ids))] {
		delete(r.retries, id)
	}
}

func (r *recovery) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.retries, id)
}

// RunRecoverer runs a round of Recover every quarter of
// Config.RecoverAfter (at most every 10 s) until ctx ends. The hook starts
// it when Config.RecoverAfter is set.
func (e *Engine) RunRecoverer(ctx context.Context) {
	every := min(max(e.cfg.RecoverAfter/4, 50*time.Millisecond), 10*time.Second)
	for {
		if _, err := e.Recover(ctx); err != nil && ctx.Err() == nil {
			e.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "idempotency recoverer failed", slog.Any("error", err))
		}
		if timer.Sleep(ctx, every) != nil {
			return
		}
	}
}

// recoveryTable is a record table and the fields whose claims it holds.
type recoveryTable struct {
	table     store.Table
	retention time.Duration
}

// Recover runs one round of the recoverer: it runs again, or abandons,
// the claims whose lease ran out more than Config.RecoverAfter ago.
func (e *Engine) Recover(ctx context.Context) (RecoverReport, error) {
	var rep RecoverReport
	h := e.recovery.getHandler()
	switch {
	case e.cfg.RecoverAfter <= 0:
		return rep, errors.New("idem: Config.RecoverAfter is not set")
	case h == nil:
		return rep, errors.New("idem: the recoverer needs the server's handler (Engine.SetHandler)")
	}
	seen := map[string]bool{}
	var errs []error
	for _, spec := range e.fields {
		if seen[spec.table.Name] {
			continue
		}
		seen[spec.table.Name] = true
		t := recoveryTable{table: spec.table, retention: spec.tableRetention}
		if err := e.recoverTable(ctx, h, t, &rep); err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

// recoverTable runs a round over one table: the claims of its turn
// (store.AbandonedQuery), every tenant's oldest first, in that order. A
// claim that cannot run now is moved to the back of the list (requeue),
// so that no claim, however often it fails, keeps another from its turn.
func (e *Engine) recoverTable(ctx context.Context, h http.Handler, t recoveryTable, rep *RecoverReport) error {
	reading, err := e.store.Now(ctx)
	if err != nil {
		return err
	}
	now := reading.Now()
	cutoff := now.Add(-e.cfg.RecoverAfter)
	claims, err := e.store.Abandoned(ctx, store.AbandonedQuery{Table: t.table, LeaseEndedBefore: cutoff, ClaimedBefore: now.Add(-t.retention), Limit: recoverBatch})
	if err != nil {
		return err
	}
	for _, c := range claims {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.recoverClaim(ctx, h, t, c, reading, cutoff, rep)
	}
	return nil
}

// recoverClaim runs c again, or abandons it past the horizon when it
// cannot run; a claim not run now goes to the back of the list.
func (e *Engine) recoverClaim(ctx context.Context, h http.Handler, t recoveryTable, c store.AbandonedClaim, reading store.Reading, cutoff time.Time, rep *RecoverReport) {
	id := store.Ref{Table: t.table, Tenant: c.Tenant, Key: c.Key}.ID()
	now := reading.Now()
	field := fieldName(c.Fingerprint)
	// The horizon counts from the claim, which the runs that fail and
	// release it do not move: past it, the claim is not run again.
	if c.ClaimedAt.Before(now.Add(-t.retention)) {
		e.abandonClaim(ctx, t, c, field, reading, id, rep)
		return
	}
	if !e.recovery.due(id, now) {
		e.requeue(ctx, t, c, field, reading, cutoff)
		rep.Waiting++
		return
	}
	run := storedRun{end: unrunnable}
	// A field that opted out since the claim was made is not run either.
	if spec := e.fields[field]; len(c.Operation) > 0 && (spec == nil || spec.recoverable) {
		run = e.runStored(ctx, h, c)
	}
	switch {
	case run.outcome == outcomeExecuted:
		e.recovery.forget(id)
		rep.Recovered++
		e.tel.recovered.Add(ctx, 1, metric.WithAttributes(attrField.String(field)))
		if run.code != "" {
			rep.Compensated++
			e.tel.compensated.Add(ctx, 1, metric.WithAttributes(attrField.String(field)))
		}
		e.logClaim(ctx, slog.LevelInfo, "idempotency claim recovered", field, c, slog.String("code", run.code))
	case run.outcome == outcomeReplayed:
		e.recovery.forget(id) // finished meanwhile
	case run.code == string(idemcode.InProgress):
		// Another process runs it now.
	default:
		e.recovery.failed(id, now, e.cfg.RecoverAfter)
		// A run that took the claim over and released it has moved it
		// back already (its lease ended when it was released), and this
		// move, fenced by the attempt listed, changes nothing; a run
		// refused before any takeover (the caller's context could not
		// be made, the operation no longer passes validation) is moved
		// here.
		e.requeue(ctx, t, c, field, reading, cutoff)
		rep.Waiting++
		e.logClaim(ctx, slog.LevelDebug, "idempotency claim not recovered yet", field, c, slog.String("outcome", run.String()), slog.String("code", run.code))
	}
}

// requeue moves c to the back of the recoverer's list (store.Requeue):
// it leaves the list until RecoverAfter has passed again, behind every
// claim abandoned meanwhile. It stays pending, its lease ended: its
// client's retry still takes it over at once, and it is abandoned at the
// horizon like any other.
func (e *Engine) requeue(ctx context.Context, t recoveryTable, c store.AbandonedClaim, field string, reading store.Reading, cutoff time.Time) {
	_, err := e.store.Requeue(ctx, store.Requeue{Ref: store.Ref{Table: t.table, Tenant: c.Tenant, Key: c.Key},
		Attempt: c.Attempt, LeaseEndedBefore: cutoff, Now: reading.Now()})
	if err != nil && ctx.Err() == nil {
		e.logClaim(ctx, slog.LevelWarn, "could not move an idempotency claim back in the recoverer's list", field, c, slog.Any("error", err))
	}
}

// abandonClaim abandons c, and reports it.
func (e *Engine) abandonClaim(ctx context.Context, t recoveryTable, c store.AbandonedClaim, field string, reading store.Reading, id string, rep *RecoverReport) {
	ok, err := e.abandon(ctx, t, c, field, reading)
	if err != nil {
		e.logClaim(ctx, slog.LevelWarn, "could not abandon idempotency claim", field, c, slog.Any("error", err))
		return
	}
	if ok {
		e.recovery.forget(id)
		rep.Abandoned++
		e.tel.abandoned.Add(ctx, 1, metric.WithAttributes(attrField.String(field)))
		e.logClaim(ctx, slog.LevelWarn, "idempotency claim abandoned: stored as failed with "+string(idemcode.Abandoned), field, c)
	}
}

// storedRun is what became of a claim's run: how it ended and, when the
// handler answered, the hook's outcome of the field and the code of its
// first error, if any.
type storedRun struct {
	end     runEnd
	outcome fieldOutcome
	code    string
}

// runEnd is how the recoverer's run of a claim ended.
type runEnd uint8

const (
	// runAnswered: the handler answered; see the outcome and the code.
	runAnswered runEnd = iota
	// unrunnable: the claim kept no operation that can be sent.
	unrunnable
	// unreadable: the handler's answer could not be read.
	unreadable
)

// String names the run in the recoverer's log: its outcome when the
// handler answered, else why there is none.
func (r storedRun) String() string {
	switch r.end {
	case unrunnable:
		return "unrunnable"
	case unreadable:
		return "unreadable"
	}
	return r.outcome.String()
}

// runStored sends the claim's operation through the server's handler as
// its caller (or its tenant alone), and reads what the hook did with the
// field.
func (e *Engine) runStored(ctx context.Context, h http.Handler, c store.AbandonedClaim) storedRun {
	var op storedOperation
	if err := json.Unmarshal(c.Operation, &op); err != nil || op.Query == "" {
		return storedRun{end: unrunnable}
	}
	// The caller stays here: the request carries the query and variables,
	// as they were kept (numbers as they were written).
	body, err := json.Marshal(storedOperation{Query: op.Query, Variables: op.Variables})
	if err != nil {
		return storedRun{end: unrunnable}
	}
	runCtx, err := e.runAs(ctx, c.Tenant, op.Caller)
	if err != nil {
		e.logClaim(ctx, slog.LevelInfo, "idempotency claim's caller refused by Config.CallerContext", fieldName(c.Fingerprint), c, slog.Any("error", err))
		return storedRun{outcome: outcomeRefused}
	}
	req, err := http.NewRequestWithContext(withRecovering(runCtx), http.MethodPost, "/", bytes.NewReader(body))
	if err != nil {
		return storedRun{end: unrunnable}
	}
	req.Header.Set("Content-Type", "application/json")
	// The claim exists: the hook looks it up first (a claim would send an
	// insert that writes nothing).
	req.Header.Set(idemcode.HeaderRetry, "1")
	if e.cfg.KeyHeader {
		// The key is in the operation; the header agrees with it, and
		// lets a claim kept before the key was written into its operation
		// (an argument left null beside the header) run too.
		req.Header.Set(idemcode.HeaderKey, idemkey.HeaderValue(c.Key))
	}
	w := &responseBuffer{header: http.Header{}}
	h.ServeHTTP(w, req)
	var resp struct {
		Errors []struct {
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
		Extensions struct {
			Idempotency map[string]idemcode.FieldReport `json:"idempotency"`
		} `json:"extensions"`
	}
	if err := json.Unmarshal(w.body.Bytes(), &resp); err != nil {
		return storedRun{end: unreadable}
	}
	var out storedRun
	for _, f := range resp.Extensions.Idempotency {
		out.outcome = parseOutcome(f.Outcome)
	}
	for _, e := range resp.Errors {
		if code, _ := e.Extensions["code"].(string); code != "" {
			out.code = code
			break
		}
	}
	return out
}

// runAs returns ctx acting as the claim's caller (Config.CallerContext)
// or, without one, as its tenant (Config.TenantContext).
func (e *Engine) runAs(ctx context.Context, tenant string, caller []byte) (context.Context, error) {
	if e.cfg.CallerContext == nil {
		return e.cfg.TenantContext(ctx, tenant), nil
	}
	runCtx, err := e.cfg.CallerContext(ctx, tenant, caller)
	if err == nil && runCtx == nil {
		err = errors.New("Config.CallerContext returned no context")
	}
	return runCtx, err
}

// abandon stores c as failed with IDEMPOTENCY_ABANDONED: a takeover, then
// the completion of the attempt it made, as a retry's attempt would. It
// reports false when another attempt changed the claim first.
func (e *Engine) abandon(ctx context.Context, t recoveryTable, c store.AbandonedClaim, field string, reading store.Reading) (bool, error) {
	ref := store.Ref{Table: t.table, Tenant: c.Tenant, Key: c.Key}
	now := reading.Now()
	ok, err := e.store.TakeOver(ctx, store.TakeOver{Ref: ref, Attempt: c.Attempt, Now: now, LeaseUntil: now.Add(e.cfg.Lease)})
	if err != nil || !ok {
		return false, err
	}
	ge := refusal.GQL(refusal.Errorf(idemcode.Abandoned, c.Key,
		"the request with this idempotency key was abandoned by its client and could not be finished by the server; it will not run again, use a new key for a new intent"))
	ge.Path = ast.Path{ast.PathName(field)}
	// Not marked recovered: IDEMPOTENCY_ABANDONED says who stored it.
	_, response, _, err := encodeResponse(graphql.Null, gqlerror.List{ge}, e.cfg.MaxResponseBytes, false)
	if err != nil {
		return false, err
	}
	return e.store.Complete(ctx, nil, store.Completion{Ref: ref, Attempt: c.Attempt + 1, Status: record.StatusFailed, Response: response, At: reading.Now()})
}

func (e *Engine) logClaim(ctx context.Context, level slog.Level, msg, field string, c store.AbandonedClaim, attrs ...slog.Attr) {
	attrs = append(attrs,
		slog.String("field", field),
		slog.String("tenant", c.Tenant),
		slog.String("key_hash", idemkey.Hash(c.Key)))
	e.cfg.Logger.LogAttrs(ctx, level, msg, attrs...)
}

// withRecovering marks the context of an operation the recoverer runs, so
// that the attempt's stored result says so (storedResponse.Recovered) and
// the error presenter's log says whose run failed (reqstate.Recoverer).
func withRecovering(ctx context.Context) context.Context { return reqstate.WithRecoverer(ctx) }

func recovering(ctx context.Context) bool { return reqstate.Recoverer(ctx) }

// fieldName is the mutation field a fingerprint names ("" when it names
// none).
func fieldName(fp string) string {
	f, ok := fingerprint.Parse(fp)
	if !ok {
		return ""
	}
	return f.Field[strings.LastIndex(f.Field, ".")+1:]
}

// responseBuffer is the response of an operation the recoverer runs.
type responseBuffer struct {
	header http.Header
	body   bytes.Buffer
}

func (w *responseBuffer) Header() http.Header         { return w.header }
func (w *responseBuffer) Write(b []byte) (int, error) { return w.body.Write(b) }
func (w *responseBuffer) WriteHeader(int)             {}
