package engine

// The request flow of one idempotent mutation field, in the order it
// happens. Each step has one verb: the engine serves a field (serve, from
// InterceptRootField), which validates its request before any database
// work (validate), waits behind an identical request of this process
// (admit, inflight.go) and settles its key (settle, settle.go: read the
// record, ask protocol.Decide, then claim, take over, replay, refuse or
// wait). A claim or a takeover runs one attempt (run, attempt.go: the
// transaction, the lease, the completion); the claim's insert itself
// happens when gqlgen reaches the field's resolver (InterceptField →
// attempt.begin → mode.begin → attempt.insertClaim). A call without a key
// to a mutation whose key is optional during a rollout runs without any
// of this (runKeyless, keyless.go).

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/directive"
	"github.com/goovo/idem/internal/document"
	"github.com/goovo/idem/internal/fingerprint"
	"github.com/goovo/idem/internal/idemkey"
	"github.com/goovo/idem/internal/refusal"
	"github.com/goovo/idem/internal/reqstate"
	"github.com/goovo/idem/internal/store"
)

// maxSelectionFields bounds an idempotent mutation's selection, fragments
// expanded, whatever Limits say: the fingerprint prints it expanded, so that
// a fragment spread twice in each of 40 nested fragments, a short document
// that Limits.MaxFields refuses, would otherwise be printed 2^40 times
// (IDEMPOTENCY_REQUEST_TOO_LARGE).
const maxSelectionFields = 10_000

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
	// expiresAt is when the key's result stops replaying, once the key
	// holds one (extensions.idempotency's expiresAt); zero otherwise.
	expiresAt time.Time
}

// ref names the request's record.
func (r *request) ref() store.Ref {
	return store.Ref{Table: r.spec.table, Tenant: r.tenant, Key: r.key}
}

// serve answers one idempotent mutation field.
func (e *Engine) serve(ctx context.Context, spec *fieldSpec, oc *graphql.OperationContext, field graphql.CollectedField, next graphql.RootResolver) graphql.Marshaler {
	r := &request{spec: spec, field: field.Field, executed: executedField(field), alias: field.Alias}
	ctx, span := e.tel.startSpan(ctx, r)
	var (
		res     graphql.Marshaler
		outcome fieldOutcome
	)
	start := time.Now()
	err := e.validate(ctx, r, oc)
	switch {
	case r.spec.keyOptional && isCode(err, idemcode.KeyMissing):
		// The key is optional during a rollout (keyless.go): the call runs
		// as the mutation did before it was idempotent.
		res, outcome, err = e.runKeyless(ctx, r, next)
	case err == nil:
		r.id = r.ref().ID()
		leave, queued := e.admit(ctx, r)
		if leave != nil {
			defer leave()
		}
		res, outcome, err = e.settle(ctx, r, queued, next)
		if err == nil && (outcome == outcomeExecuted || outcome == outcomeReplayed) {
			e.finished.add(r.id)
		}
	}
	if err != nil {
		outcome = outcomeRefused
	}
	if outcome == outcomeExecuted {
		spec.pace.observe(time.Since(start))
	}
	finishSpan(span, r, outcome, err)
	operationFrom(ctx).record(r.alias, r.key, outcome, r.expiresAt)
	if err != nil {
		return e.refuse(ctx, r, err)
	}
	return res
}

// validate reads the request's key, tenant and fingerprint, all before any
// database work.
func (e *Engine) validate(ctx context.Context, r *request, oc *graphql.OperationContext) error {
	key, inHeader, err := e.keyOf(ctx, oc, r.field)
	if err != nil {
		return err
	}
	r.key, r.keyInHeader = key, inHeader
	if r.tenant, err = e.tenant(ctx, key); err != nil {
		return err
	}
	if n := document.ExpandedFields(r.executed.SelectionSet); n > maxSelectionFields {
		return refusal.Errorf(idemcode.RequestTooLarge, key, "the mutation's selection has %s fields, fragments expanded; the limit is %d", document.Count(n), maxSelectionFields)
	}
	fp := fingerprint.Of(e.schema, e.schema.Mutation.Name, r.executed, oc.Variables, r.spec.leaveOut...)
	if fp.ArgumentsSize > e.cfg.MaxArgumentBytes {
		return refusal.Errorf(idemcode.RequestTooLarge, key, "the mutation's arguments are %d bytes; the limit is %d", fp.ArgumentsSize, e.cfg.MaxArgumentBytes)
	}
	if e.cfg.KeyOwner != nil && !recovering(ctx) {
		// The key belongs to its caller (protocol: another caller's key).
		fp.Owner = fingerprint.OwnerOf(e.cfg.KeyOwner(ctx))
	}
	r.fingerprint = fp.String()
	// An atomic claim commits with its result or not at all, and the
	// completion clears the operation: no recoverer could ever read it, so
	// it is neither formatted nor sent.
	if r.spec.recoverable && r.spec.mode != modeAtomic {
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
func (e *Engine) keyOf(ctx context.Context, oc *graphql.OperationContext, field *ast.Field) (key string, inHeader bool, err error) {
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
		where := directive.KeyArgument
		if e.cfg.KeyHeader {
			where += " (or the " + idemcode.HeaderKey + " header)"
		}
		return "", false, refusal.Errorf(idemcode.KeyMissing, "", "%s is required: send one key per intent and reuse it on every retry", where)
	}
	if err := idemkey.Validate(key); err != nil {
		return "", false, err
	}
	return key, inHeader, nil
}

// keyArgument reads the field's key argument; present is false when it is
// absent or null.
func keyArgument(oc *graphql.OperationContext, field *ast.Field) (key string, present bool, err error) {
	a := field.Arguments.ForName(directive.KeyArgument)
	if a == nil {
		return "", false, nil
	}
	v, verr := a.Value.Value(oc.Variables)
	if verr != nil {
		return "", false, refusal.Errorf(idemcode.KeyInvalid, "", "%s must be a string", directive.KeyArgument)
	}
	if v == nil {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, refusal.Errorf(idemcode.KeyInvalid, "", "%s must be a string", directive.KeyArgument)
	}
	return s, true, nil
}

func (e *Engine) tenant(ctx context.Context, key string) (string, error) {
	t, err := e.cfg.Tenant(ctx)
	if err != nil || t == "" {
		return "", refusal.Errorf(idemcode.Unauthenticated, key, "the request has no authenticated tenant")
	}
	// A tenant is stored with every record: one the database cannot store
	// would fail every lookup (a store outage on PostgreSQL).
	if why := document.Why(t); why != "" {
		return "", refusal.Errorf(idemcode.Unauthenticated, key, "the request's tenant holds %s", why)
	}
	return t, nil
}

// refuse answers the field with err and null.
func (e *Engine) refuse(ctx context.Context, r *request, err error) graphql.Marshaler {
	var ie *idemcode.Error
	if !errors.As(err, &ie) {
		ie = refusal.Errorf(idemcode.Unavailable, r.key, "the idempotency store is unavailable")
	}
	ge := refusal.GQL(ie)
	ge.Path = ast.Path{ast.PathName(r.alias)}
	if r.field.Position != nil {
		ge.Locations = []gqlerror.Location{{Line: r.field.Position.Line, Column: r.field.Position.Column}}
	}
	if ie.Code == idemcode.InProgress {
		operationFrom(ctx).inProgressFor(r.alias, ie.RetryAfter)
		e.tel.add(ctx, e.tel.inProgress, r)
	} else {
		e.tel.add(ctx, e.tel.refusals, r, attrCode.String(string(ie.Code)))
	}
	if ie.Code != idemcode.Unavailable {
		e.log(ctx, slog.LevelDebug, "idempotent mutation refused", r, slog.String("code", string(ie.Code)))
	}
	graphql.AddError(ctx, ge)
	return graphql.Null
}

func (e *Engine) log(ctx context.Context, level slog.Level, msg string, r *request, attrs ...slog.Attr) {
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

// retried reports whether the request said it is a retry
// (idemcode.HeaderRetry).
func retried(ctx context.Context) bool {
	st := reqstate.From(ctx)
	return st != nil && st.Retry
}

// isCode reports whether err is a refusal with code.
func isCode(err error, code idemcode.Code) bool {
	var ie *idemcode.Error
	return errors.As(err, &ie) && ie.Code == code
}
