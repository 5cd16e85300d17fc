package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/directive"
	"github.com/goovo/idem/internal/refusal"
	"github.com/goovo/idem/internal/tenancy"
)

// runKeyless runs an idempotent mutation called without a key while its key
// is optional, as the mutation ran before it was idempotent: no claim, no
// record. Its row (for a mutation whose records are rows of a business
// entity) is built from its arguments as a claim's would be, but without a
// key, so that the resolver finds it where it always does
// (ent.Claimed<T>); the row and the resolver's writes commit together, or
// not at all when the field has an error. Each such call is counted
// (MetricKeyless) and logged, so that the rollout can tell when no client
// is left without a key.
func (e *Engine) runKeyless(ctx context.Context, r *request, next graphql.RootResolver) (graphql.Marshaler, fieldOutcome, error) {
	tenant, err := e.tenant(ctx, "")
	if err != nil {
		return nil, outcomeRefused, err
	}
	r.tenant = tenant
	e.tel.add(ctx, e.tel.keyless, r)
	e.log(ctx, slog.LevelInfo, "idempotent mutation called without a key while its key is optional; it ran without idempotency", r)

	k := &keylessCall{eng: e, req: r}
	fieldCtx := graphql.WithFreshResponseContext(withKeyless(ctx, k))
	res := next(fieldCtx)
	errs := graphql.GetErrors(fieldCtx)
	if k.refused != nil {
		if k.tx != nil {
			_ = k.tx.Rollback()
		}
		return nil, outcomeRefused, k.refused
	}
	if k.tx == nil {
		// gqlgen refused the field before its resolver (argument coercion).
		addErrors(ctx, errs)
		return res, outcomeRefused, nil
	}
	if k.secondRow.Load() {
		_ = k.tx.Rollback()
		return nil, outcomeRefused, e.secondRow(ctx, r)
	}
	if len(errs) > 0 || k.panicked() || ctx.Err() != nil {
		if err := k.tx.Rollback(); err != nil {
			e.log(ctx, slog.LevelDebug, "rollback failed", r, slog.Any("error", err))
		}
		addErrors(ctx, errs)
		return graphql.Null, outcomeKeyless, nil
	}
	if err := k.tx.Commit(); err != nil {
		e.log(ctx, slog.LevelError, "commit of a keyless call failed", r, slog.Any("error", err))
		return nil, outcomeKeyless, refusal.Errorf(idemcode.Unavailable, "",
			"the database failed while committing the mutation, which may or may not have been applied; send an %s to make retries safe", directive.KeyArgument)
	}
	return res, outcomeKeyless, nil
}

// keylessCall is the state a keyless call shares between the root
// interceptor and the field interceptor.
type keylessCall struct {
	eng *Engine
	req *request

	// Set by begin, on the resolver's goroutine, before the resolver runs.
	started bool
	tx      idembackend.Tx
	refused error // why the call did not run, when it did not

	// oneAtATime serialises the field tree's resolvers, which share the
	// transaction's connection, as an attempt's do (see InterceptField).
	oneAtATime sync.Mutex

	mu    sync.Mutex
	panic bool

	// secondRow: see attempt.secondRow.
	secondRow atomic.Bool
}

type keylessKey struct{}

func withKeyless(ctx context.Context, k *keylessCall) context.Context {
	return context.WithValue(ctx, keylessKey{}, k)
}

func keylessFrom(ctx context.Context) *keylessCall {
	k, _ := ctx.Value(keylessKey{}).(*keylessCall)
	return k
}

// interceptField opens the transaction and inserts the row just before the
// root field's resolver runs, where the typed arguments are known, runs the
// field's tree one resolver at a time, and watches it for panics.
func (k *keylessCall) interceptField(ctx context.Context, next graphql.Resolver) (any, error) {
	if fc := graphql.GetFieldContext(ctx); fc != nil && fc.Field.Field == k.req.field && !k.started {
		k.started = true
		var err error
		if ctx, err = k.begin(ctx, fc.Args); err != nil {
			return nil, err
		}
	}
	k.oneAtATime.Lock()
	defer k.oneAtATime.Unlock()
	defer func() {
		if r := recover(); r != nil {
			k.mu.Lock()
			k.panic = true
			k.mu.Unlock()
			panic(r)
		}
	}()
	return next(ctx)
}

func (k *keylessCall) panicked() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.panic
}

// begin opens the call's transaction and inserts its row, unless the record
// entity holds nothing but records (idemschema.Record).
func (k *keylessCall) begin(ctx context.Context, args map[string]any) (context.Context, error) {
	e, r := k.eng, k.req
	txCtx, tx, err := e.store.Begin(ctx)
	if err != nil {
		k.refused = e.unavailable(r, err)
		return ctx, errNotRun()
	}
	k.tx = tx
	c := &idembackend.Claim{Tenant: r.tenant, Mode: r.spec.mode}
	if !r.spec.records.RecordOnly {
		if _, err := r.spec.records.Insert(tenancy.WithClaimInsert(txCtx), tx, c, args); err != nil {
			var in *idembackend.InputError
			if errors.As(err, &in) {
				k.refused = refusal.Errorf(idemcode.BadUserInput, "", "%s", in.Message)
			} else {
				k.refused = e.unavailable(r, err)
			}
			return ctx, errNotRun()
		}
	}
	return withClaim(txCtx, c, r.spec, &k.secondRow), nil
}
