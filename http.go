package idem

import (
	"context"
	"fmt"
	"net/http"

	"github.com/99designs/gqlgen/graphql/handler"

	"github.com/goovo/idem/idemhttp"
	"github.com/goovo/idem/internal/engine"
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
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(cfg.engine())
	if err != nil {
		return nil, err
	}
	defer func() {
		// gqlgen panics when an extension rejects the schema.
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	idemhttp.Configure(srv, cfg.Limits, &idemhttp.Presenter{Logger: cfg.Logger, MapError: cfg.MapError, Next: cfg.ErrorPresenter})
	srv.Use(eng)
	h := idemhttp.Middleware(srv, cfg.Limits)
	eng.SetHandler(h) // the recoverer runs abandoned claims through it
	if cfg.RecoverAfter > 0 {
		go eng.RunRecoverer(doneContext(cfg.Done))
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
