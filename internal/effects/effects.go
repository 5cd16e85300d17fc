// Package effects is what the engine tells the outbox (idemoutbox) about
// the attempt a resolver runs in: which record and key it is, and the
// transaction that stores its result, so that effects recorded there
// commit if and only if the result does.
package effects

import (
	"context"
	"sync"

	"entgo.io/ent/dialect"
)

// Scope is one attempt's transaction, as the outbox needs it.
type Scope struct {
	// Dialect is the ent dialect of the backend: "postgres" or "sqlite3".
	Dialect string
	// Table, Tenant and Key name the record ("" Key: a call without one).
	Table, Tenant, Key string
	// Tx is the driver's transaction the result commits in.
	Tx dialect.Tx

	mu   sync.Mutex
	seen map[string]int
}

// Next numbers the jobs of kind the attempt enqueues: 1 for the first, 2
// for the second. An attempt that runs again after a takeover numbers them
// the same, so a job's downstream key is the same whichever attempt
// committed it.
func (s *Scope) Next(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]int{}
	}
	s.seen[kind]++
	return s.seen[kind]
}

type scopeKey struct{}

// With returns ctx carrying s.
func With(ctx context.Context, s *Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, s)
}

// From returns the scope of the attempt running in ctx, or nil.
func From(ctx context.Context) *Scope {
	s, _ := ctx.Value(scopeKey{}).(*Scope)
	return s
}
