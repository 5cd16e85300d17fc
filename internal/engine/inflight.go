package engine

import (
	"context"
	"sync"
	"time"
)

// inFlight lets one request of a kind into the protocol at a time per
// process: identical requests (same record, key and fingerprint) that
// arrive while the first is being served wait here, in memory, instead of
// each claiming, polling and holding a pooled connection. A burst of
// hundreds of duplicates (a client's retries, a double-click fanned out by
// a proxy) then costs the database what one request costs, and cannot
// crowd the pool that the first request's own statements and lease
// renewals need: starved renewals would let a duplicate take a live
// attempt over.
//
// It is only a queue in front of the protocol, never a decision: a waiter
// that is let in, or that stops waiting, runs the whole protocol, whose
// every step the database fences. Across processes nothing is shared, and
// the database alone arbitrates, as before.
type inFlight struct {
	firsts flights[struct{}] // the first request of each kind, until it leaves
}

// flights shares one piece of work per key among the requests that want
// it at once: the first to join a key leads, does the work on its own
// goroutine and calls done; the others wait for ready and read what it
// left in val. The next join after done starts a new flight.
type flights[T any] struct {
	mu sync.Mutex
	m  map[string]*flight[T]
}

// flight is the work of one key; val is set by its leader before done.
type flight[T any] struct {
	ready chan struct{} // closed by done
	val   T
}

// join returns the flight of key in progress, or a new one that the
// caller, its leader, must end with done.
func (f *flights[T]) join(key string) (fl *flight[T], leader bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl := f.m[key]; fl != nil {
		return fl, false
	}
	if f.m == nil {
		f.m = make(map[string]*flight[T])
	}
	fl = &flight[T]{ready: make(chan struct{})}
	f.m[key] = fl
	return fl, true
}

// done ends fl, the flight of key: those that joined it read its val.
func (f *flights[T]) done(key string, fl *flight[T]) {
	f.mu.Lock()
	delete(f.m, key)
	f.mu.Unlock()
	close(fl.ready)
}

// enter admits the request named by key. For the first request of its kind
// it returns a leave function to call once the request is served. Any
// other waits until the first leaves, ctx ends or until passes (zero: no
// bound but ctx), and returns nil and queued: it goes on through the
// protocol, now most often to replay what the first stored.
func (f *inFlight) enter(ctx context.Context, key string, until time.Time) (leave func(), queued bool) {
	first, leader := f.firsts.join(key)
	if leader {
		return func() { f.firsts.done(key, first) }, false
	}
	var bound <-chan time.Time
	if !until.IsZero() {
		wait := time.Until(until)
		if wait <= 0 {
			return nil, true
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		bound = t.C
	}
	select {
	case <-first.ready:
	case <-ctx.Done():
	case <-bound:
	}
	return nil, true
}

// admit queues r behind an identical request of this process that is being
// served, for as long as a duplicate would wait for it in the database: in
// atomic mode until it commits (a duplicate waits on the unique index), in
// lease mode for Config.WaitForInFlight. queued reports that r found such a
// request: its key most likely has a record now.
func (e *Engine) admit(ctx context.Context, r *request) (leave func(), queued bool) {
	key := r.id + "\x00" + r.fingerprint
	var until time.Time
	if r.spec.mode != modeAtomic {
		until = time.Now().Add(e.cfg.WaitForInFlight)
	}
	return e.inFlight.enter(ctx, key, until)
}
