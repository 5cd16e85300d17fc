package idem

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
	mu    sync.Mutex
	first map[string]chan struct{} // closed when the first request leaves
}

// enter admits the request named by key. For the first request of its kind
// it returns a leave function to call once the request is served. Any
// other waits until the first leaves, ctx ends or until passes (zero: no
// bound but ctx), and returns nil and queued: it goes on through the
// protocol, now most often to replay what the first stored.
func (f *inFlight) enter(ctx context.Context, key string, until time.Time) (leave func(), queued bool) {
	f.mu.Lock()
	done, busy := f.first[key]
	if !busy {
		if f.first == nil {
			f.first = make(map[string]chan struct{})
		}
		done = make(chan struct{})
		f.first[key] = done
		f.mu.Unlock()
		return func() {
			f.mu.Lock()
			delete(f.first, key)
			f.mu.Unlock()
			close(done)
		}, false
	}
	f.mu.Unlock()
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
	case <-done:
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
func (e *Extension) admit(ctx context.Context, r *request) (leave func(), queued bool) {
	key := r.id + "\x00" + r.fingerprint
	var until time.Time
	if r.spec.mode != ModeAtomic {
		until = time.Now().Add(e.cfg.WaitForInFlight)
	}
	return e.inFlight.enter(ctx, key, until)
}
