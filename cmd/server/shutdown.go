package main

import (
	"context"
	"errors"
	"github.com/goovo/idem"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goovo/idem/graph"
	"github.com/goovo/idem/idemhttp"
)

// shutdown is the server's graceful shutdown, in phases an orchestrator
// understands (docs/operations.md, "Shutdown"):
//
//  1. not ready: at the signal /readyz answers 503 while the listener keeps
//     accepting and serving for Grace, so that the load balancers that
//     probe it, or the endpoints controller, stop sending new requests
//     before it closes;
//  2. drain: the listener closes and the requests under way get up to
//     Drain to finish (http.Server.Shutdown);
//  3. cut: the requests still running then have their context cancelled
//     and are waited for, up to releaseWait, so that none is cut in the
//     middle of a statement by the database's pool closing under it.
//
// River stops beside phases 2 and 3, with its own bound (RiverStop). Each
// phase is logged with what it found.
type shutdown struct {
	Grace, Drain, RiverStop time.Duration

	Health  *idemhttp.Health
	Hook    *idem.Hook // its attempts outlive their clients: it finishes or releases them
	River   *graph.River
	Logger  *slog.Logger
	Signals <-chan os.Signal // a second signal ends the grace early

	inFlight atomic.Int64   // requests whose handler runs
	handlers sync.WaitGroup // the same, to wait for
	cut      context.CancelFunc
}

// releaseWait bounds how long the cut phase waits for the handlers whose
// context it cancelled: they give up at their next statement, and an
// idempotent mutation releases its claim (or, with the recoverer, leaves
// it to be finished).
const releaseWait = 5 * time.Second

// server returns the HTTP server of h, with the connection bounds t
// (idemhttp.NewServer), whose requests the shutdown counts and can cancel.
func (s *shutdown) server(h http.Handler, t idemhttp.Timeouts) *http.Server {
	base, cut := context.WithCancel(context.Background())
	s.cut = cut
	srv := idemhttp.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handlers.Add(1)
		s.inFlight.Add(1)
		defer func() {
			s.inFlight.Add(-1)
			s.handlers.Done()
		}()
		h.ServeHTTP(w, r)
	}), t)
	// Every request's context derives from base, which the cut phase
	// cancels.
	srv.BaseContext = func(net.Listener) context.Context { return base }
	return srv
}

// run shuts srv down in phases once the first signal has come, and returns
// when the server and River have stopped.
func (s *shutdown) run(srv *http.Server) error {
	start := time.Now()
	s.Health.Drain()
	s.Logger.Info("shutdown: not ready; still serving for the grace", slog.Duration("grace", s.Grace),
		slog.Int64("in_flight", s.inFlight.Load()))
	if s.Grace > 0 {
		t := time.NewTimer(s.Grace)
		select {
		case <-t.C:
		case <-s.Signals:
			t.Stop()
			s.Logger.Info("shutdown: a second signal ended the grace")
		}
	}

	// River's jobs have nothing to do with the HTTP requests: both stop
	// at once.
	riverDone := make(chan struct{})
	go func() {
		defer close(riverDone)
		s.stopRiver()
	}()

	s.Logger.Info("shutdown: draining; the listener is closed", slog.Duration("drain", s.Drain),
		slog.Int64("in_flight", s.inFlight.Load()))
	drainStart := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), s.Drain)
	err := srv.Shutdown(ctx)
	switch {
	case err == nil:
		// Attempts whose clients hung up are no request's any more, and
		// the recoverer's never were: the hook waits for them within what
		// is left of the drain, then releases the rest.
		if herr := s.Hook.Shutdown(ctx); herr != nil {
			s.Logger.Warn("shutdown: attempts without a client outlived the drain; released", slog.String("error", herr.Error()))
		}
		cancel()
		s.Logger.Info("shutdown: drained", slog.Duration("took", time.Since(drainStart)))
	case errors.Is(err, context.DeadlineExceeded):
		n := s.inFlight.Load()
		s.Logger.Warn("shutdown: the drain ran out; cancelling the requests still running", slog.Int64("in_flight", n))
		// A claimed attempt does not end with its request's context (a
		// disconnect is not an abort): the hook ends its attempts
		// deliberately, rolled back and released, before the other
		// requests' contexts are cancelled.
		_ = s.Hook.Shutdown(ctx)
		cancel()
		s.cut()
		// Closed after the handlers return, so that each client gets
		// its request's answer (a retryable error) rather than a
		// connection closed under it.
		defer srv.Close()
		if !s.waitHandlers(releaseWait) {
			s.Logger.Error("shutdown: requests still running after their cancellation; they are cut when the database closes",
				slog.Int64("in_flight", s.inFlight.Load()), slog.Duration("waited", releaseWait))
		} else {
			s.Logger.Info("shutdown: the cancelled requests returned", slog.Int64("cancelled", n))
		}
	default:
		cancel()
		return err
	}
	<-riverDone
	s.Logger.Info("shutdown: done", slog.Duration("took", time.Since(start)))
	return nil
}

// stopRiver stops River (on MySQL the receipt workers), waiting up to
// RiverStop for its running jobs; then it cancels them (River runs each
// again later, on any process; a cancelled delivery's row is freed for
// any process's next poll).
func (s *shutdown) stopRiver() {
	began := time.Now()
	what := "River"
	if s.River.Name != "river" {
		what = "the " + s.River.Name
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.RiverStop)
	defer cancel()
	if err := s.River.Stop(ctx); err != nil {
		s.Logger.Warn("shutdown: "+what+" did not finish in time; cancelled", slog.Duration("river_stop", s.RiverStop), slog.Any("error", err))
		return
	}
	s.Logger.Info("shutdown: "+what+" stopped", slog.Duration("took", time.Since(began)))
}

// waitHandlers waits until no handler runs, up to d; it reports whether
// they all returned.
func (s *shutdown) waitHandlers(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		s.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
