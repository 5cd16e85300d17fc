package engine

import (
	"context"
	"sync"
	"time"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/reqstate"
)

// fieldOutcome is what became of an idempotent field, as its report
// (extensions.idempotency) and its span name it: one of idemcode's
// Outcome names.
type fieldOutcome uint8

const (
	// outcomeNone: nothing was reported (the recoverer read no report).
	outcomeNone fieldOutcome = iota
	outcomeExecuted
	outcomeReplayed
	outcomeReleased
	outcomeRefused
	outcomeKeyless
)

// String is the outcome's name on the wire (idemcode.Outcome…); "" for
// outcomeNone.
func (o fieldOutcome) String() string {
	switch o {
	case outcomeExecuted:
		return idemcode.OutcomeExecuted
	case outcomeReplayed:
		return idemcode.OutcomeReplayed
	case outcomeReleased:
		return idemcode.OutcomeReleased
	case outcomeRefused:
		return idemcode.OutcomeRefused
	case outcomeKeyless:
		return idemcode.OutcomeKeyless
	}
	return ""
}

// parseOutcome reads an outcome's name on the wire; outcomeNone for one
// it does not know.
func parseOutcome(name string) fieldOutcome {
	for o := outcomeExecuted; o <= outcomeKeyless; o++ {
		if o.String() == name {
			return o
		}
	}
	return outcomeNone
}

type operationKey struct{}

// operation collects the idempotent fields of one GraphQL operation.
type operation struct {
	http       *reqstate.State
	mu         sync.Mutex
	fields     map[string]idemcode.FieldReport
	inProgress map[string]time.Duration // fields answered IDEMPOTENCY_IN_PROGRESS, their retry delay
}

// operationContext is ctx carrying an operation, made in one allocation
// where context.WithValue would take a second beside the operation's: the
// hook's extensions cost no allocation per request more than the engine
// did alone (BenchmarkPath).
type operationContext struct {
	context.Context
	op operation
}

// withOperation returns ctx carrying a new operation of the request st.
func withOperation(ctx context.Context, st *reqstate.State) (context.Context, *operation) {
	c := &operationContext{Context: ctx, op: operation{http: st}}
	return c, &c.op
}

// Value implements context.Context.
func (c *operationContext) Value(key any) any {
	if _, ok := key.(operationKey); ok {
		return &c.op
	}
	return c.Context.Value(key)
}

func operationFrom(ctx context.Context) *operation {
	op, _ := ctx.Value(operationKey{}).(*operation)
	return op
}

// record reports one field; expiresAt, when the key holds a result, is
// when it stops replaying.
func (op *operation) record(alias, key string, outcome fieldOutcome, expiresAt time.Time) {
	if op == nil {
		return
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.fields == nil {
		op.fields = map[string]idemcode.FieldReport{}
	}
	report := idemcode.FieldReport{Key: key, Outcome: outcome.String(), Replayed: outcome == outcomeReplayed}
	if !expiresAt.IsZero() {
		report.ExpiresAt = expiresAt.UTC().Truncate(time.Second).Format(time.RFC3339)
	}
	op.fields[alias] = report
}

// report hands the headers' facts to the HTTP layer: replayed when every
// idempotent field was, the key echoed when there was one field (in the
// form of the request's header, or as the draft's quoted string), and a
// retry delay when every field is in progress.
func (op *operation) report() {
	if op.http == nil {
		return
	}
	all := len(op.fields) > 0
	var echo string
	for _, f := range op.fields {
		all = all && f.Replayed
		echo = f.Key
	}
	if len(op.fields) != 1 {
		echo = ""
	}
	var retryAfter time.Duration
	if len(op.inProgress) == len(op.fields) {
		for _, d := range op.inProgress {
			retryAfter = max(retryAfter, d)
		}
	}
	op.http.SetAnswer(reqstate.Answer{AllReplayed: all, EchoKey: echo, RetryAfter: retryAfter,
		EchoQuoted: echo != "" && !(op.http.HasKey && echo == op.http.Key && !op.http.KeyQuoted)})
}

// inProgressFor records that the field answered IDEMPOTENCY_IN_PROGRESS
// with this retry delay.
func (op *operation) inProgressFor(alias string, retryAfter time.Duration) {
	if op == nil {
		return
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.inProgress == nil {
		op.inProgress = map[string]time.Duration{}
	}
	op.inProgress[alias] = retryAfter
}
