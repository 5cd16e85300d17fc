package engine

import (
	"sync/atomic"
	"time"
)

// pace estimates how long one idempotent mutation takes, from the attempts
// this process completed recently: an exponentially weighted moving average
// of their durations, from the request's arrival at the hook to the stored
// result. IDEMPOTENCY_IN_PROGRESS tells a duplicate to come back after about
// that long, where the lease left would make it wait for the whole lease
// (30 s by default) behind work that takes two.
type pace struct {
	avg atomic.Int64 // nanoseconds; 0 until the first sample
}

// paceWeight is the weight of a new sample: the estimate follows a change
// in the mutation's duration within a few attempts, and one slow attempt
// moves it by a quarter of its excess.
const paceWeight = 0.25

// observe adds the duration of a completed attempt.
func (p *pace) observe(d time.Duration) {
	if d <= 0 {
		return
	}
	for {
		old := p.avg.Load()
		next := int64(d)
		if old > 0 {
			next = old + int64(paceWeight*float64(int64(d)-old))
		}
		if p.avg.CompareAndSwap(old, next) {
			return
		}
	}
}

// retryAfter is the delay IDEMPOTENCY_IN_PROGRESS suggests to a duplicate
// of an attempt that has been running for elapsed, its lease having
// leaseLeft to run: what remains of the mutation's recent duration, or,
// before any attempt completed in this process, as long again as it has
// been running. Never more than the lease left (then the claim can be
// taken over), and at least a second.
func (p *pace) retryAfter(elapsed, leaseLeft time.Duration) time.Duration {
	d := elapsed
	if avg := time.Duration(p.avg.Load()); avg > 0 {
		d = avg - elapsed
	}
	return max(min(d, leaseLeft), time.Second)
}
