package engine

// The attempts this process runs, and how they end. An attempt that has
// claimed its key runs to its end whether or not its client still waits: a
// client that hangs up does not abort it (the protocol's "a disconnect is
// not an abort", docs/protocol.md). Its resolver runs on a context that the
// request's end does not cancel, and that ends only with the attempt's own
// deadline (Config.AttemptTimeout), its lease lost, or the process's
// shutdown once the drain is over (Shutdown). The result is stored as
// always, and replayed to the key's next request.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

var (
	// errShutdown ends the attempts still running when Shutdown's drain
	// is over: they roll back and release their claims.
	errShutdown = errors.New("the server is shutting down and the attempt did not end within the drain")
	// errLeaseLost ends an attempt whose claim another attempt took over:
	// its completion would be fenced out anyway.
	errLeaseLost = errors.New("the attempt lost its lease to another attempt")
	// errStopping refuses to start an attempt once Shutdown has begun.
	errStopping = errors.New("the server is shutting down")
)

// attempts counts the attempts that run, so that Shutdown can drain them.
type attempts struct {
	mu       sync.Mutex
	running  sync.WaitGroup
	stopping bool
	// drained ends when Shutdown gives up waiting: the attempts still
	// running are cancelled (errShutdown).
	drained context.Context
	cancel  context.CancelCauseFunc
	// overdue is the cause that ends an attempt at its deadline, of the
	// timeout overdueAfter: made once, not per attempt.
	overdue      error
	overdueAfter time.Duration
}

// start registers an attempt of the request whose context is ctx and
// returns the context its resolver runs on: ctx's values, not its
// cancellation, bounded by timeout (none when it is 0) and ended by abort (the lease lost) or
// by the end of Shutdown's drain. end must be called when the attempt has
// ended (stored or released). It fails once Shutdown has begun.
func (s *attempts) start(ctx context.Context, timeout time.Duration) (actx context.Context, abort context.CancelCauseFunc, end func(), err error) {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return nil, nil, nil, errStopping
	}
	if s.drained == nil {
		s.drained, s.cancel = context.WithCancelCause(context.Background())
	}
	s.running.Add(1)
	drained := s.drained
	if s.overdue == nil || s.overdueAfter != timeout {
		s.overdue, s.overdueAfter = fmt.Errorf("%w: the attempt ran longer than its deadline (Config.AttemptTimeout, %v)", context.DeadlineExceeded, timeout), timeout
	}
	overdue := s.overdue
	s.mu.Unlock()

	actx, abort = context.WithCancelCause(context.WithoutCancel(ctx))
	cancelTimeout := context.CancelFunc(func() {})
	if timeout > 0 {
		actx, cancelTimeout = context.WithTimeoutCause(actx, timeout, overdue)
	}
	stop := context.AfterFunc(drained, func() { abort(context.Cause(drained)) })
	return actx, abort, func() {
		stop()
		cancelTimeout()
		abort(context.Canceled)
		s.running.Done()
	}, nil
}

// Shutdown stops the engine's attempts: it refuses new ones (a request
// that has not claimed its key yet is answered IDEMPOTENCY_UNAVAILABLE,
// retry with the same key), waits until the running ones have ended or ctx
// ends, and then cancels those still running, which roll back and release
// their claims as an attempt that fails with a retryable error does, and
// waits for them to have done so (at most completionTimeout: a resolver
// that does not return when its context ends is not waited for). It
// returns ctx's error when it had to cancel attempts.
func (e *Engine) Shutdown(ctx context.Context) error {
	s := &e.attempts
	s.mu.Lock()
	s.stopping = true
	if s.drained == nil {
		s.drained, s.cancel = context.WithCancelCause(context.Background())
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	s.cancel(errShutdown)
	t := time.NewTimer(completionTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	return ctx.Err()
}
