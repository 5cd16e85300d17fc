package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"

	"github.com/goovo/idem/idemhttp"
	"github.com/goovo/idem/internal/engine"
	"github.com/goovo/idem/internal/extension"
)

// maxErrors is how many errors an answer without data shows
// (extension.ErrorLimit), as graphql-js.
const maxErrors = 100

// Hook is the idempotency hook of one configuration. Its Handler makes a
// gqlgen server's @idempotent mutations retry-safe; package idemctl's Admin
// (idemctl.New(hook)) maintains the records with the same retention,
// horizon, lease and clock, so that the server and its sweeper cannot
// disagree.
type Hook struct {
	cfg    Config
	eng    *engine.Engine
	served atomic.Bool
	// background is the context of the background work (the recoverer),
	// which Shutdown ends.
	background     context.Context
	stopBackground context.CancelFunc
}

// New checks cfg and returns its hook. Errors name the Config field at
// fault. Config.Tenant is needed to serve (Handler), not by an operator's
// program that only maintains the records.
func New(cfg Config) (*Hook, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(cfg.engine())
	if err != nil {
		return nil, err
	}
	h := &Hook{cfg: cfg, eng: eng}
	h.background, h.stopBackground = context.WithCancel(context.Background())
	return h, nil
}

// Shutdown ends the hook's work for a graceful shutdown, in phases: it
// stops the recoverer, refuses to start attempts (a request that has not
// claimed its key yet is answered IDEMPOTENCY_UNAVAILABLE, to be retried
// with the same key, on another process), and waits for the attempts that
// run, which go on to their stored results even when their clients have
// hung up (Config.AttemptTimeout), until they have ended or ctx ends: the
// drain. Then it cancels the attempts still running: each rolls back and
// releases its claim, as an attempt that fails with a retryable error does,
// so that its client's retry, or the recoverer of another process, runs
// it again at once. Shutdown returns once they have (within a few
// seconds), with ctx's error if it had to cancel any.
//
// An attempt runs in its request's handler, so http.Server.Shutdown waits
// for it too: give both the same drain, and call Hook.Shutdown when
// http.Server.Shutdown returns (or at the same time), before the process
// exits and closes the database.
//
//	drain, cancel := context.WithTimeout(context.Background(), 20*time.Second)
//	defer cancel()
//	err := srv.Shutdown(drain)
//	err = errors.Join(err, hook.Shutdown(drain))
func (h *Hook) Shutdown(ctx context.Context) error {
	h.stopBackground()
	return h.eng.Shutdown(ctx)
}

// Config returns the hook's configuration, with its defaults filled in.
func (h *Hook) Config() Config { return h.cfg }

// MutationRetention is the retention of one @idempotent mutation that
// replays its records for less than their record entity's retention
// (@idempotent(retentionSeconds:)).
type MutationRetention struct {
	// Mutation is the field, "Mutation.createPageView".
	Mutation string
	// Entity is the record entity that keeps its records.
	Entity string
	// Retention is how long a finished record of the mutation replays.
	Retention time.Duration
}

// MutationRetentions returns the @idempotent mutations of the schema that
// Handler (or ReadSchema) read whose retention is shorter than their
// record entity's, by entity then mutation; schemaRead is false before
// either has read the schema. The sweeper of an Admin made of this hook
// (idemctl.New) archives their records once their own retention has
// passed; before (and in an operator's program that reads no schema) it
// knows none, and archives records by their entity's retention.
func (h *Hook) MutationRetentions() (_ []MutationRetention, schemaRead bool) {
	rs, read := h.eng.MutationRetentions()
	var out []MutationRetention
	for _, r := range rs {
		out = append(out, MutationRetention{Mutation: r.Field, Entity: r.Entity, Retention: r.Retention})
	}
	return out, read
}

// ReadSchema reads the @idempotent mutations of es and checks them as
// Handler does, for a hook that does not serve (an operator's program):
// its Admin (idemctl.New) then archives each mutation's records by the
// mutation's own retention (MutationRetentions). Handler reads the schema
// of the server it serves by itself.
func (h *Hook) ReadSchema(es graphql.ExecutableSchema) error { return h.eng.Validate(es) }

// Handler makes srv's @idempotent mutations retry-safe, bounds what a
// request may ask for, and returns the handler to serve. It puts the HTTP
// edge on srv (idemhttp.Configure: the error presenter, put your own in
// Config.ErrorPresenter; the recover function; the document and complexity
// limits of Config.Limits; a query cache bounded in bytes, which replaces
// one set before; a last transport for what no other takes), adds the
// hook's extensions (every operation, queries included, is refused when
// it holds text the database cannot store, its answer without data shows
// at most 100 errors, and its context carries the request's tenant,
// Config.Tenant) and the hook, wraps srv in idemhttp.Middleware (the body
// limit, the Idempotency-Key header, the response headers), and starts the
// recoverer when Config.RecoverAfter is set.
//
//	srv := handler.New(graph.NewExecutableSchema(cfg))
//	srv.AddTransport(transport.POST{})
//	hook, err := idem.New(idem.Config{
//		Backend: client.IdempotencyBackend(),
//		Tenant:  tenantFromContext,
//	})
//	h, err := hook.Handler(srv)
//	http.Handle("/query", h)
//
// Add transports before Handler, and extensions that work on the operation
// (a complexity limit of your own, say) after it, so that the limits see the
// operation first; an extension that rewrites the query
// (extension.AutomaticPersistedQuery) goes before Handler. A hook serves
// one server: make one Hook for each.
func (h *Hook) Handler(srv *handler.Server) (_ http.Handler, err error) {
	if h.cfg.Tenant == nil {
		return nil, errors.New("idem: Config.Tenant is required to serve")
	}
	if !h.served.CompareAndSwap(false, true) {
		return nil, errors.New("idem: Hook.Handler was called already: a hook serves one server, make one Hook for each")
	}
	defer func() {
		// gqlgen panics when an extension rejects the schema.
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	cfg := h.cfg
	idemhttp.Configure(srv, cfg.Limits, &idemhttp.Presenter{Logger: cfg.Logger, MapError: cfg.MapError, Next: cfg.ErrorPresenter})
	// The checks of an operation run in the order installed: a malformed
	// key header first, then text no database can store, then the
	// engine's checks of the keys.
	srv.Use(h.eng.KeyHeaderCheck())
	srv.Use(extension.Text{})
	srv.Use(extension.ErrorLimit{Max: maxErrors})
	srv.Use(extension.Tenant{Of: cfg.Tenant})
	srv.Use(h.eng)
	hh := idemhttp.Middleware(srv, cfg.Limits)
	h.eng.SetHandler(hh) // the recoverer runs abandoned claims through it
	if cfg.RecoverAfter > 0 {
		go h.eng.RunRecoverer(doneContext(h.background, cfg.Done))
	}
	return hh, nil
}

// doneContext is a context that ends with parent or when done is closed
// (never, when it is nil).
func doneContext(parent context.Context, done <-chan struct{}) context.Context {
	if done == nil {
		return parent
	}
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-done:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx
}
