package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// fault is one planned fault: a kill -9 of a server (restarted after
// cfg.killDowntime) or a restart of PostgreSQL.
type fault struct {
	at   time.Duration // after the start of the load
	kind string        // "kill" or "postgres"
}

// planFaults spreads the kills and the PostgreSQL restarts evenly over the
// load phase, restarts between kills, so that every fault hits a running
// workload and the recovery of one is not hidden by the next.
func planFaults(cfg *config) []fault {
	k, r := cfg.kills, cfg.pgRestarts
	n := k + r
	plan := make([]fault, 0, n)
	for i := range n {
		kind := "kill"
		// The i-th event is a restart when the restarts' share of events
		// rounded at its middle grows: K R K for two kills and a restart.
		if ((2*i+2)*r+n)/(2*n) > (2*i*r+n)/(2*n) {
			kind = "postgres"
		}
		plan = append(plan, fault{at: cfg.duration * time.Duration(i+1) / time.Duration(n+1), kind: kind})
	}
	return plan
}

// injectFaults carries out the plan while the load runs. Kills go round
// the running servers; a killed server restarts in the background (a
// start can take long while the database is busy), so that the plan keeps
// its times. At most one server spikes at a time: a killed spiking server comes
// back steady, and a killed steady one comes back spiking if none spikes,
// so that the spike moves from server to server. (If every server spiked
// beyond the lease, the attempts of a key that several clients retry could
// take each other over for ever: see BENCHMARKS.md.) It returns when every
// killed server is back.
func injectFaults(ctx context.Context, cfg *config, f *fleet, pg postgres, st *stats, v *violations, steady, spike profile) {
	start := time.Now()
	var restarts sync.WaitGroup
	defer restarts.Wait()
	kills := 0
	for _, ft := range planFaults(cfg) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(start.Add(ft.at))):
		}
		if ctx.Err() != nil {
			v.add("fault-not-injected", "%s at %v: the load phase ended first", ft.kind, ft.at)
			continue
		}
		at := time.Since(start)
		switch ft.kind {
		case "kill":
			victim := f.running(kills)
			if victim < 0 {
				v.add("fault-not-injected", "kill at %v: no server is running", ft.at)
				continue
			}
			kills++
			next := steady
			if cfg.spikeLatency > 0 && !f.anyRuns(spike.name) {
				next = spike
			}
			f.kill(victim, next)
			st.faults.add("kill -9")
			restarts.Go(func() {
				time.Sleep(cfg.killDowntime)
				if err := f.restart(context.WithoutCancel(ctx), victim); err != nil {
					v.add("fault-failed", "restart of server %d after kill -9: %v", victim, err)
					return
				}
				st.event(at, "kill -9 server %d, back after %v with provider %s", victim, (time.Since(start) - at).Round(time.Millisecond), next.name)
			})
		case "postgres":
			down, err := pg.restart(ctx)
			if err != nil {
				v.add("fault-failed", "PostgreSQL restart: %v", err)
				continue
			}
			st.faults.add("postgres restart")
			st.event(at, "restart PostgreSQL %s, accepting connections again after %v", pg, down.Round(time.Millisecond))
		default:
			panic(fmt.Sprintf("unknown fault %q", ft.kind))
		}
	}
}

// running returns the first server from slot n on (round the fleet) whose
// process runs, or -1.
func (f *fleet) running(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.servers {
		j := (n + i) % len(f.servers)
		if f.servers[j].cmd != nil {
			return j
		}
	}
	return -1
}

// anyRuns reports whether a server, running or restarting, has the named
// profile.
func (f *fleet) anyRuns(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.servers {
		if s.profile.name == name {
			return true
		}
	}
	return false
}
