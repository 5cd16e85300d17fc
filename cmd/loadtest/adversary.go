package main

// loadtest adversary: how much can one hostile tenant hold up another? It
// starts one example server per backend (SQLite in a
// file of its own, then PostgreSQL in the run's schema) and times tenant B's
// ordinary mutations (createOrder, then createPayment of that order), one
// request at a time from each of B's clients: alone, then while tenant A
// sends one kind of hostile request back to back, for each kind, then while
// A sends all of them at once. The kinds are package hostile's catalogue
// (the worst request under and over each default limit: fragment chains
// and fan-outs, repeated and conflicting fields, aliases, depth,
// directives, variables, deep literals, long strings, many operations,
// padding, introspection, batches, bodies over the limit), a body over the
// limit sent chunked, and the most expensive payment the default limits
// allow (a tree of 127 order and payment objects, each a query of its
// own). With -limits=false the server runs with its limits off:
// the attacks as they were before them (give the phases time: one alias
// bomb then takes twenty seconds, and a fragment bomb never finishes).
//
// It reports, per phase, B's latency (p50, p99, max) and answers, and what
// A's requests got. With the limits on it fails (exit 1) when tenant B got
// anything but its result, or a hostile request anything but the answer
// the catalogue expects; latencies are reported, not judged. Both run on
// the machine under test: with two cores, the attacker's CPU (bodies of
// megabytes written back to back) slows B too.
//
//	go run ./cmd/loadtest adversary                     # exits 1 on an answer the limits should have prevented
//	go run ./cmd/loadtest adversary -limits=false -phase 30s

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goovo/idem/internal/testkit/hostile"
)

// adversaryConfig holds the flags of loadtest adversary.
type adversaryConfig struct {
	phase   time.Duration
	victims int
	limits  bool
	skip    *regexp.Regexp
}

func defineAdversary(fs *flag.FlagSet) command {
	c := &adversaryConfig{skip: regexp.MustCompile("^$")}
	fs.DurationVar(&c.phase, "phase", 10*time.Second, "length of each phase (the other tenant alone, under each kind of attack, under all of them)")
	fs.IntVar(&c.victims, "victims", 2, "concurrent clients of the other tenant")
	fs.BoolVar(&c.limits, "limits", true, "the server's request limits on (its defaults); false turns them off, to measure the attacks as they were before them")
	fs.Func("skip", "a regular expression; the kinds of hostile requests whose names match it are not sent (against a server without the limits, the ones that take minutes each)", func(s string) (err error) {
		c.skip, err = regexp.Compile(s)
		return err
	})
	return c
}

func (c *adversaryConfig) check(*flag.FlagSet, *dbConfig) error {
	if c.phase <= 0 || c.victims < 1 {
		return errors.New("-phase must be positive, -victims at least 1")
	}
	return nil
}

func (c *adversaryConfig) needs() needs { return needs{server: true} }

// run runs the measurement on SQLite, then on PostgreSQL, and prints the
// figures.
func (c *adversaryConfig) run(e *runEnv) error {
	fmt.Printf("adversary: tenant B (%d clients), %v alone, %v under each kind of tenant A's hostile requests, %v under all of them\n", c.victims, c.phase, c.phase, c.phase)
	var wrong []string
	for _, b := range backends(e, "adversary") {
		args := []string{"-sweep-every", "0", "-materialize-every", "0"}
		label := b.name + ", limits on (defaults)"
		if !c.limits {
			args = append(args, "-max-body-bytes", "-1", "-max-tokens", "-1", "-max-fields", "-1", "-max-aliases", "-1", "-max-depth", "-1",
				"-max-nodes", "-1", "-max-field-pairs", "-1", "-max-complexity", "-1")
			label = b.name + ", limits off"
		}
		f, err := b.start(e, "adversary", args)
		if err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		report, err := c.measure(e.ctx, newSingleClient(f, 2*time.Minute))
		f.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		report.print(os.Stdout, label)
		if c.limits {
			wrong = append(wrong, report.unexpected(b.name)...)
		}
	}
	if err := e.ctx.Err(); err != nil {
		return err
	}
	if len(wrong) > 0 {
		return fmt.Errorf("with the limits on, answers that should not be:\n  %s", strings.Join(wrong, "\n  "))
	}
	fmt.Println("\nadversary: every hostile request got the answer it should (refused, or answered within the limits), and tenant B got every answer")
	return nil
}

// timing is one timed request.
type timing struct {
	took    time.Duration
	outcome string // "ok", an error code, "HTTP 413", or a transport error
}

// timings collects the timings of one kind of request.
type timings struct {
	mu  sync.Mutex
	all []timing
}

func (s *timings) add(took time.Duration, outcome string) {
	s.mu.Lock()
	s.all = append(s.all, timing{took, outcome})
	s.mu.Unlock()
}

func (s *timings) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.all) == 0 {
		return "no request finished"
	}
	ds := make([]time.Duration, len(s.all))
	outcomes := map[string]int{}
	for i, x := range s.all {
		ds[i] = x.took
		outcomes[x.outcome]++
	}
	slices.Sort(ds)
	q := func(f float64) time.Duration { return ds[int(f*float64(len(ds)-1))].Round(100 * time.Microsecond) }
	names := make([]string, 0, len(outcomes))
	for k := range outcomes {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []string
	for _, k := range names {
		out = append(out, fmt.Sprintf("%s %d", k, outcomes[k]))
	}
	return fmt.Sprintf("n %4d  p50 %9v  p99 %9v  max %9v  %s", len(ds), q(0.5), q(0.99), q(1), strings.Join(out, ", "))
}

// adversaryPhase is what one phase measured: tenant B's mutations, and
// tenant A's requests of the phase's kinds.
type adversaryPhase struct {
	name    string
	victims map[string]*timings // by mutation
	attacks []string
	sent    map[string]*timings // by kind
	want    map[string]string   // by kind
}

// adversaryReport holds the phases of one server.
type adversaryReport struct {
	phases []*adversaryPhase
}

func (r *adversaryReport) print(w io.Writer, label string) {
	fmt.Fprintf(w, "\n== adversary: %s\n", label)
	for _, ph := range r.phases {
		fmt.Fprintf(w, "  %s\n", ph.name)
		for _, field := range []string{"createOrder", "createPayment"} {
			fmt.Fprintf(w, "    tenant B %-24s %s\n", field, ph.victims[field].summary())
		}
		for _, kind := range ph.attacks {
			fmt.Fprintf(w, "    tenant A %-24s %s\n", kind, ph.sent[kind].summary())
		}
	}
}

// unexpected lists what a server with its limits on should not have
// answered: tenant B anything but a result, a hostile request anything but
// its refusal.
func (r *adversaryReport) unexpected(backend string) []string {
	var out []string
	check := func(what string, s *timings, want string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := 0
		for _, x := range s.all {
			if x.outcome != want {
				n++
			}
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("%s, %s: %d answers other than %q", backend, what, n, want))
		}
	}
	for _, ph := range r.phases {
		for _, field := range []string{"createOrder", "createPayment"} {
			check(ph.name+", tenant B's "+field, ph.victims[field], "ok")
		}
		for _, kind := range ph.attacks {
			check(ph.name+", tenant A's "+kind, ph.sent[kind], ph.want[kind])
		}
	}
	return out
}

// adversaryAttack is one kind of hostile request.
type adversaryAttack struct {
	name string
	want string // the answer it gets from a server with its limits on
	send func(ctx context.Context) string
}

// measure runs the phases against c's server: tenant B alone, under each
// kind of attack, under all of them at once.
func (c *adversaryConfig) measure(ctx context.Context, cl *client) (*adversaryReport, error) {
	// Tenant A's order to pay in the deep selection.
	order, outcome := cl.createOrder(ctx, "tenant-a", 100)
	if order == "" {
		return nil, fmt.Errorf("createOrder: %s", outcome)
	}
	attacks := []adversaryAttack{
		{"8 MiB body, chunked", "HTTP 413", func(ctx context.Context) string {
			return cl.rawBody(ctx, "tenant-a", paddedQuery(8<<20))
		}},
		{"most expensive payment allowed", "ok", func(ctx context.Context) string {
			id, outcome := cl.createOrder(ctx, "tenant-a", 100)
			if outcome == "canceled" {
				return outcome // the phase ended during its first step: not an answer
			}
			if id == "" {
				return "createOrder " + outcome
			}
			return cl.query(ctx, "tenant-a", hostile.ExpensivePayment(newKey(), id)).outcome
		}},
	}
	for _, req := range hostile.Catalogue(order) {
		if c.skip.MatchString(req.Name) {
			continue
		}
		var sent atomic.Int64
		attacks = append(attacks, adversaryAttack{req.Name, req.Want, func(ctx context.Context) string {
			// A document the server has not seen, each time: the same
			// text again would be answered from its caches.
			return cl.hostile(ctx, "tenant-a", req.Fresh(int(sent.Add(1))))
		}})
	}
	r := &adversaryReport{}
	r.phases = append(r.phases, c.timePhase(ctx, cl, "alone", nil))
	for _, a := range attacks {
		r.phases = append(r.phases, c.timePhase(ctx, cl, "under "+a.name, []adversaryAttack{a}))
	}
	r.phases = append(r.phases, c.timePhase(ctx, cl, "under all of them at once", attacks))
	return r, ctx.Err()
}

// timePhase times tenant B's mutations for c.phase while tenant A sends each
// of attacks back to back, one request of each kind at a time.
func (c *adversaryConfig) timePhase(ctx context.Context, cl *client, name string, attacks []adversaryAttack) *adversaryPhase {
	ph := &adversaryPhase{
		name:    name,
		victims: map[string]*timings{"createOrder": {}, "createPayment": {}},
		sent:    map[string]*timings{},
		want:    map[string]string{},
	}
	ctx, cancel := context.WithTimeout(ctx, c.phase)
	defer cancel()
	var wg sync.WaitGroup
	for _, a := range attacks {
		s := &timings{}
		ph.sent[a.name], ph.want[a.name], ph.attacks = s, a.want, append(ph.attacks, a.name)
		wg.Go(func() {
			for ctx.Err() == nil {
				start := time.Now()
				if outcome := a.send(ctx); outcome != "canceled" {
					s.add(time.Since(start), outcome)
				}
			}
		})
	}
	for range c.victims {
		wg.Go(func() {
			for ctx.Err() == nil {
				start := time.Now()
				id, outcome := cl.createOrder(ctx, "tenant-b", 100)
				if outcome == "canceled" {
					return
				}
				ph.victims["createOrder"].add(time.Since(start), outcome)
				if id == "" {
					continue
				}
				start = time.Now()
				if outcome := cl.createPayment(ctx, "tenant-b", id); outcome != "canceled" {
					ph.victims["createPayment"].add(time.Since(start), outcome)
				}
			}
		})
	}
	wg.Wait()
	return ph
}

// paddedQuery is a valid request of n bytes: a small query and spaces.
func paddedQuery(n int) []byte {
	b := bytes.Repeat([]byte(" "), n)
	copy(b, `{"query":"{ __typename }","x":"`)
	copy(b[n-2:], `"}`)
	return b
}
