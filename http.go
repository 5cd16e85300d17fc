package idem

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"

	"github.com/goovo/idem/idemhttp"
	"github.com/goovo/idem/internal/reqstate"
)

// Install makes srv's @idempotent mutations retry-safe and bounds what a
// request may ask for. It puts the HTTP edge on srv (idemhttp.Configure:
// the error presenter, put your own in Config.ErrorPresenter; the recover
// function; the document and complexity limits; a last transport for what
// no other takes), adds the hook, and returns the handler to serve, which
// bounds the request body and sets the response headers
// (idemhttp.Middleware).
//
//	srv := handler.New(graph.NewExecutableSchema(cfg))
//	srv.AddTransport(transport.POST{})
//	h, err := idem.Install(srv, idem.Config{
//		Backend: client.IdempotencyBackend(),
//		Tenant:  tenantFromContext,
//	})
//	http.Handle("/query", h)
//
// Add transports before Install, and extensions that work on the operation
// (a complexity limit of your own, say) after it, so that the limits see the
// operation first; an extension that rewrites the query
// (extension.AutomaticPersistedQuery) goes before Install.
func Install(srv *handler.Server, cfg Config) (_ http.Handler, err error) {
	ext, err := New(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		// gqlgen panics when an extension rejects the schema.
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	idemhttp.Configure(srv, ext.cfg.Limits, &idemhttp.Presenter{Logger: ext.cfg.Logger, MapError: ext.cfg.MapError, Next: ext.cfg.ErrorPresenter})
	srv.Use(ext)
	h := ext.Middleware(srv)
	if cfg.RecoverAfter > 0 {
		go ext.RunRecoverer(doneContext(cfg.Done))
	}
	return h, nil
}

// doneContext is a context that ends when done is closed (never, when it
// is nil).
func doneContext(done <-chan struct{}) context.Context {
	if done == nil {
		return context.Background()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-done
		cancel()
	}()
	return ctx
}

// Middleware is idemhttp.Middleware with Config.Limits; the recoverer
// (Config.RecoverAfter) runs claims through the handler it returns.
// Install applies it; use it directly when adding the extension with
// srv.Use.
func (e *Extension) Middleware(next http.Handler) http.Handler {
	h := idemhttp.Middleware(next, e.cfg.Limits)
	e.recovery.setHandler(h)
	return h
}

// retried reports whether the request said it is a retry
// (idemhttp.HeaderRetry).
func retried(ctx context.Context) bool {
	st := reqstate.From(ctx)
	return st != nil && st.Retry
}

type operationKey struct{}

// operation collects the idempotent fields of one GraphQL operation.
type operation struct {
	http       *reqstate.State
	mu         sync.Mutex
	fields     map[string]idemhttp.FieldReport
	inProgress map[string]time.Duration // fields answered IDEMPOTENCY_IN_PROGRESS, their retry delay
}

func operationFrom(ctx context.Context) *operation {
	op, _ := ctx.Value(operationKey{}).(*operation)
	return op
}

func (op *operation) record(alias, key, outcome string) {
	if op == nil {
		return
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.fields == nil {
		op.fields = map[string]idemhttp.FieldReport{}
	}
	op.fields[alias] = idemhttp.FieldReport{Key: key, Outcome: outcome, Replayed: outcome == idemhttp.OutcomeReplayed}
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
