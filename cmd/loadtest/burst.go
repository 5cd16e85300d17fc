package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/goovo/idem/idemcode"
)

// burstReport is what a burst did.
type burstReport struct {
	keys, copies int
	phases       []*burstPhase
	peakConns    int // connections to the database at most, during the burst
	elapsed      time.Duration
}

// burstPhase is one wave of the burst: every copy of every key sent at the
// same moment.
type burstPhase struct {
	label     string // in the summary
	name      string
	requests  int // sent at once
	st        *stats
	latencies []time.Duration // of each copy, until its final answer
	elapsed   time.Duration
}

// burstFailures are the retry reasons that a burst without faults must never
// see: everything but IDEMPOTENCY_IN_PROGRESS (a duplicate bounced while
// the first request runs) and "released" (a provider failure, rolled back).
var burstFailures = []string{string(idemcode.Unavailable), "http5xx", "network", "timeout", "bad-response"}

// runBurst sends cfg.burstKeys new orders, each by cfg.burstCopies clients
// at once, copy c of key k to server k+c (round the fleet: the copies of a
// key reach different servers, like retries behind a load balancer), and
// then, the same way, one payment of each order. Its intents join the
// registry, for the audit. An attempt waits for its answer for up to
// cfg.drain: no client gives up early, so that a request queued for a
// database connection shows as latency, and a refusal as a refusal.
func runBurst(ctx context.Context, cfg *faultsConfig, f *fleet, reg *registry, v *violations, prefix string) *burstReport {
	start := time.Now()
	rep := &burstReport{keys: cfg.burstKeys, copies: cfg.burstCopies}
	cc := cfg.client
	cc.abandonRate, cc.timeout, cc.maxInFlight = 0, cfg.drain, cfg.burstKeys*cfg.burstCopies
	ctx, cancel := context.WithTimeout(ctx, 2*cfg.drain)
	defer cancel()

	orders := make([]*intent, cfg.burstKeys)
	for k := range orders {
		orders[k] = newIntent("createOrder", fmt.Sprintf("%s-burst-order-%d", prefix, k),
			fmt.Sprintf("tenant-%d", k%cfg.tenants), 100+rand.IntN(99_900), "")
	}
	rep.phases = append(rep.phases, sendBurst(ctx, cc, cfg.burstCopies, f, reg, v, "orders", "createOrder (atomic mode)", orders))
	var pays []*intent
	for k, o := range orders {
		if id := orderID(o); id != "" && o.succeeded() {
			pays = append(pays, newIntent("createPayment", fmt.Sprintf("%s-burst-pay-%d", prefix, k), o.tenant, o.amount, id))
		}
	}
	rep.phases = append(rep.phases, sendBurst(ctx, cc, cfg.burstCopies, f, reg, v, "payments", "createPayment (lease mode)", pays))
	rep.elapsed = time.Since(start)
	return rep
}

// sendBurst sends every copy of every intent at the same moment and waits
// for their final answers.
func sendBurst(ctx context.Context, cc clientConfig, copies int, f *fleet, reg *registry, v *violations, label, name string, intents []*intent) *burstPhase {
	ph := &burstPhase{label: label, name: name, st: &stats{}, requests: len(intents) * copies}
	c := newClient(cc, f, ph.st)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		ready = make(chan struct{})
	)
	for k, in := range intents {
		in.burst = true
		reg.add(in)
		ph.st.intents.add(in.field)
		ph.st.duplicated.Add(1)
		ph.st.copies.Add(int64(copies - 1))
		for cp := range copies {
			wg.Go(func() {
				<-ready
				t := time.Now()
				if c.perform(ctx, in, k+cp) {
					mu.Lock()
					ph.latencies = append(ph.latencies, time.Since(t))
					mu.Unlock()
				}
			})
		}
	}
	start := time.Now()
	for _, in := range intents {
		in.started = start
	}
	close(ready)
	wg.Wait()
	ph.elapsed = time.Since(start)
	for _, reason := range burstFailures {
		if n := ph.st.retries.get(reason); n > 0 {
			v.add("burst-"+strings.ToLower(reason), "%s: %d attempts answered %s during the burst", name, n, reason)
		}
	}
	return ph
}

func (r *burstReport) print(p func(label, format string, args ...any), engine string, maxConns int) {
	p("-- burst", "%d keys × %d copies at once, the copies of a key to different servers", r.keys, r.copies)
	for _, ph := range r.phases {
		st := ph.st
		p(ph.label, "%s: %d requests at once (%d keys, %d duplicate copies), %d sent with retries; all answered in %v",
			ph.name, ph.requests, st.intents.total(), st.copies.Load(), st.requests.Load(), ph.elapsed.Round(time.Millisecond))
		p("", "answers: %s; retries: %s", &st.answers, &st.retries)
		if len(ph.latencies) > 0 {
			lat := slices.Sorted(slices.Values(ph.latencies))
			q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))].Round(time.Millisecond) }
			p("", "time per request until its final answer: p50 %v, p99 %v, max %v", q(0.5), q(0.99), q(1))
		}
	}
	unavailable := 0
	for _, ph := range r.phases {
		unavailable += ph.st.retries.get(string(idemcode.Unavailable))
	}
	p("connections", "at most %d to %s during the burst (max_connections %d)", r.peakConns, engine, maxConns)
	p("unavailable", "%d answers IDEMPOTENCY_UNAVAILABLE during the burst", unavailable)
}
