package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"time"
)

// logPatterns name the server log lines the summary counts (messages of
// the hook (protocol.go, attempt.go) and of cmd/server). A line counts for the first pattern all of
// whose parts it contains.
var logPatterns = []logPattern{
	{"store unavailable, request cancelled", []string{"idempotency store unavailable", "context canceled"}},
	{"store unavailable", []string{"idempotency store unavailable"}},
	{"store failed while storing a result", []string{"idempotency store failed while storing a result"}},
	{"claims taken over", []string{"idempotency claim taken over"}},
	{"attempts fenced out (lost their claim)", []string{"idempotent attempt lost its claim"}},
	{"retryable failures, claim released", []string{"retryable error; claim released"}},
	{"claim releases retried in the background", []string{"could not release idempotency claim yet"}},
	{"claim releases that got through after retries", []string{"idempotency claim released after retries"}},
	{"claim releases given up (the lease ran out)", []string{"could not release idempotency claim;"}},
	{"unexpected errors (INTERNAL_SERVER_ERROR)", []string{"unexpected error"}},
	{"failed starts (migration)", []string{"server: migrate:"}},
	{"panics", []string{"panic"}},
}

// summary is what a load run reports.
type summary struct {
	cfg    *faultsConfig
	engine string // the database's name: PostgreSQL or MariaDB
	st     *stats
	v      *violations
	audit  auditReport
	// recovered is how long the recoverer took to leave no payment
	// pending after the load (negative: it had not by the deadline).
	recovered time.Duration
	// delivered is how long the outbox (River's, or the example's table
	// on MariaDB) took after the load to have no receipt left to deliver
	// (negative: it had not within awaitReceipts' bound).
	delivered time.Duration
	snap      *snapshot
	logs      map[string]int
	intents   []*intent
	burst     *burstReport // nil: no burst

	peakConns, maxConns              int
	setup, answered, auditTime, wall time.Duration
}

func (s *summary) print(w io.Writer) {
	p := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-14s %s\n", label, fmt.Sprintf(format, args...))
	}
	st := s.st
	fmt.Fprintln(w, "\n== loadtest summary")
	if s.cfg.duration > 0 {
		s.printLoad(w, p)
	}
	if s.burst != nil {
		s.burst.print(p, s.engine, s.maxConns)
	}
	p("database", "%d orders, %d payments, %d provider charges; the provider deduplicated %d requests on %d keys",
		len(s.snap.orders), len(s.snap.payments), len(s.snap.charges), s.audit.dedupedRequests, s.audit.dedupedKeys)
	p("receipts", "%d sent, one per paid payment required; %d redelivered to the mailer and deduplicated by their downstream key; none left to deliver %v after the load",
		len(s.snap.receipts), s.audit.redeliveredReceipts, s.delivered.Round(time.Millisecond))
	if nr := s.audit.noRetry; nr.intents > 0 {
		p("no retry", "%d payment intents sent once, never retried: %d answered by that request; of the %d unanswered, %d finished by the servers' recoverer "+
			"(%d paid, %d ORDER_ALREADY_PAID), %d never claimed (nothing charged); no payment pending %v after the load",
			nr.intents, nr.answered, nr.intents-nr.answered, nr.recoveredPaid+nr.recoveredFailed, nr.recoveredPaid, nr.recoveredFailed, nr.unclaimed, s.recovered.Round(time.Millisecond))
	}
	if s.audit.orphanCharges > 0 {
		p("notice", "%d charges voided: an attempt of a payment intent charged, was rolled back, and the competing payment won; "+
			"the intent voided its charge before answering ORDER_ALREADY_PAID", s.audit.orphanCharges)
	}
	var lines []string
	for _, lp := range logPatterns {
		if n := s.logs[lp.label]; n > 0 {
			lines = append(lines, fmt.Sprintf("%s %d", lp.label, n))
		}
	}
	if len(lines) == 0 {
		lines = []string{"nothing notable"}
	}
	p("server logs", "%s", lines[0])
	for _, l := range lines[1:] {
		p("", "%s", l)
	}
	p("audit", "%d fresh replays compared (%d requests)", s.audit.replays, st.auditRequests.Load())
	p("time", "setup %v, load and answers %v, burst %v, audit %v, %v in all",
		s.setup.Round(time.Millisecond), s.answered.Round(time.Millisecond), s.burstTime().Round(time.Millisecond),
		s.auditTime.Round(time.Millisecond), s.wall.Round(time.Millisecond))
	if s.v.total() == 0 {
		p("violations", "none")
		fmt.Fprintln(w, "PASS")
		return
	}
	p("violations", "%d: %s", s.v.total(), &s.v.counts)
	kinds := make([]string, 0, len(s.v.examples))
	for k := range s.v.examples {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		for _, e := range s.v.examples[k] {
			p("", "%s: %s", k, e)
		}
	}
	fmt.Fprintln(w, "FAIL")
}

func (s *summary) burstTime() time.Duration {
	if s.burst == nil {
		return 0
	}
	return s.burst.elapsed
}

// printLoad prints the figures of the load phase.
func (s *summary) printLoad(w io.Writer, p func(label, format string, args ...any)) {
	st := s.st
	fmt.Fprintln(w, "-- load phase, with faults")
	p("requests", "%d (load, until every intent was answered)", st.requests.Load())
	p("intents", "%d: %s", st.intents.total(), &st.intents)
	p("duplicates", "%d intents sent by several clients at once (%d extra copies)", st.duplicated.Load(), st.copies.Load())
	p("answers", "%d final: %s", st.answers.total(), &st.answers)
	p("retries", "%d: %s", st.retries.total(), &st.retries)
	var lat []time.Duration
	for _, in := range s.intents {
		if _, ok := in.result(); ok && !in.burst {
			lat = append(lat, in.latency)
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))].Round(time.Millisecond) }
		p("intent time", "until the first final answer: p50 %v, p90 %v, p99 %v, max %v", q(0.5), q(0.9), q(0.99), q(1))
	}
	p("faults", "%s", &st.faults)
	for _, e := range st.sortedEvents() {
		p("", "%7v %s", e.at.Round(time.Millisecond), e.text)
	}
	p("connections", "at most %d to %s (max_connections %d)", s.peakConns, s.engine, s.maxConns)
}
