package main

// The adversary: how much can one hostile tenant hold up another? With
// -adversary the tool starts one example server per backend (SQLite in a
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
// own). With -adversary-limits=false the server runs with its limits off:
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
//	go run ./cmd/loadtest -adversary                      # exits 1 on an answer the limits should have prevented
//	go run ./cmd/loadtest -adversary -adversary-limits=false -adversary-phase 30s

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goovo/idem/internal/testkit/hostile"
)

// adversaryConfig holds the -adversary flags.
type adversaryConfig struct {
	on      bool
	phase   time.Duration
	victims int
	limits  bool
	skip    string
}

func addAdversaryFlags(fs *flag.FlagSet, c *adversaryConfig) {
	fs.BoolVar(&c.on, "adversary", false, "measure how a hostile tenant holds up another's mutations, on SQLite and PostgreSQL, instead of the load run")
	fs.DurationVar(&c.phase, "adversary-phase", 10*time.Second, "with -adversary: length of each phase (the other tenant alone, under each kind of attack, under all of them)")
	fs.IntVar(&c.victims, "adversary-victims", 2, "with -adversary: concurrent clients of the other tenant")
	fs.BoolVar(&c.limits, "adversary-limits", true, "with -adversary: the server's request limits on (its defaults); false turns them off, to measure the attacks as they were before them")
	fs.StringVar(&c.skip, "adversary-skip", "", "with -adversary: a regular expression; the kinds of hostile requests whose names match it are not sent (against a server without the limits, the ones that take minutes each)")
}

// runAdversary runs the measurement on SQLite, then on PostgreSQL (pgEnv
// is the servers' environment for it: DATABASE_URL and
// PROVIDER_DATABASE_URL), and prints the figures.
func runAdversary(ctx context.Context, c adversaryConfig, bin, tmp string, pgEnv []string) error {
	type target struct {
		name string
		env  []string
		args []string
	}
	targets := []target{
		{"sqlite", []string{"DATABASE_URL=", "PROVIDER_DATABASE_URL="}, []string{"-db", filepath.Join(tmp, "adversary.db")}},
		{"postgres", pgEnv, nil},
	}
	fmt.Printf("adversary: tenant B (%d clients), %v alone, %v under each kind of tenant A's hostile requests, %v under all of them\n", c.victims, c.phase, c.phase, c.phase)
	var wrong []string
	for _, tg := range targets {
		args := append([]string{"-sweep-every", "0", "-materialize-every", "0"}, tg.args...)
		label := tg.name + ", limits on (defaults)"
		if !c.limits {
			args = append(args, "-max-body-bytes", "-1", "-max-tokens", "-1", "-max-fields", "-1", "-max-aliases", "-1", "-max-depth", "-1",
				"-max-nodes", "-1", "-max-field-pairs", "-1", "-max-complexity", "-1")
			label = tg.name + ", limits off"
		}
		srv, err := startAdversaryServer(ctx, bin, filepath.Join(tmp, "adversary-"+tg.name+".log"), tg.env, args)
		if err != nil {
			return fmt.Errorf("%s: %w", tg.name, err)
		}
		report, err := measureAdversary(ctx, c, srv.url)
		srv.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		report.print(os.Stdout, label)
		if c.limits {
			wrong = append(wrong, report.unexpected(tg.name)...)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(wrong) > 0 {
		return fmt.Errorf("with the limits on, answers that should not be:\n  %s", strings.Join(wrong, "\n  "))
	}
	fmt.Println("\nadversary: every hostile request got the answer it should (refused, or answered within the limits), and tenant B got every answer")
	return nil
}

// advServer is one example server process.
type advServer struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startAdversaryServer(ctx context.Context, bin, logName string, env, args []string) (*advServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	logf, err := os.Create(logName)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, append([]string{"-addr", addr}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &advServer{url: "http://" + addr + "/query", cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-s.done:
			return nil, fmt.Errorf("server exited at start (see %s)", logName)
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			return s, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.stop()
			return nil, fmt.Errorf("server does not listen on %s (see %s)", addr, logName)
		}
	}
}

func (s *advServer) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// advSample is one timed request.
type advSample struct {
	took    time.Duration
	outcome string // "ok", an error code, "HTTP 413", or a transport error
}

// advSamples collects the advSamples of one kind of request.
type advSamples struct {
	mu  sync.Mutex
	all []advSample
}

func (s *advSamples) add(took time.Duration, outcome string) {
	s.mu.Lock()
	s.all = append(s.all, advSample{took, outcome})
	s.mu.Unlock()
}

func (s *advSamples) summary() string {
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
	victims map[string]*advSamples // by mutation
	attacks []string
	sent    map[string]*advSamples // by kind
	want    map[string]string      // by kind
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
	check := func(what string, s *advSamples, want string) {
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

func measureAdversary(ctx context.Context, c adversaryConfig, url string) (*adversaryReport, error) {
	hc := &http.Client{Timeout: 2 * time.Minute}
	// Tenant A's order to pay in the deep selection.
	order, err := newAdversaryOrder(ctx, hc, url, "tenant-a")
	if err != nil {
		return nil, err
	}
	attacks := []adversaryAttack{
		{"8 MiB body, chunked", "HTTP 413", func(ctx context.Context) string {
			return advPostBody(ctx, hc, url, "tenant-a", paddedQuery(8<<20), false)
		}},
		{"most expensive payment allowed", "ok", func(ctx context.Context) string {
			id, outcome := advCreateOrder(ctx, hc, url, "tenant-a", 100, "{ id }")
			if outcome == "canceled" {
				return outcome // the phase ended during its first step: not an answer
			}
			if id == "" {
				return "createOrder " + outcome
			}
			return advPost(ctx, hc, url, "tenant-a", hostile.ExpensivePayment(advKey(), id), nil).outcome
		}},
	}
	skip := regexp.MustCompile("^$")
	if c.skip != "" {
		var err error
		if skip, err = regexp.Compile(c.skip); err != nil {
			return nil, fmt.Errorf("-adversary-skip: %w", err)
		}
	}
	for _, req := range hostile.Catalogue(order) {
		if skip.MatchString(req.Name) {
			continue
		}
		var sent atomic.Int64
		attacks = append(attacks, adversaryAttack{req.Name, req.Want, func(ctx context.Context) string {
			// A document the server has not seen, each time: the same
			// text again would be answered from its caches.
			return advSend(ctx, hc, url, "tenant-a", req.Fresh(int(sent.Add(1))))
		}})
	}
	r := &adversaryReport{}
	r.phases = append(r.phases, runPhase(ctx, c, hc, url, "alone", nil))
	for _, a := range attacks {
		r.phases = append(r.phases, runPhase(ctx, c, hc, url, "under "+a.name, []adversaryAttack{a}))
	}
	r.phases = append(r.phases, runPhase(ctx, c, hc, url, "under all of them at once", attacks))
	return r, ctx.Err()
}

// runPhase times tenant B's mutations for c.phase while tenant A sends
// each of attacks back to back, one request of each kind at a time.
func runPhase(ctx context.Context, c adversaryConfig, hc *http.Client, url, name string, attacks []adversaryAttack) *adversaryPhase {
	ph := &adversaryPhase{
		name:    name,
		victims: map[string]*advSamples{"createOrder": {}, "createPayment": {}},
		sent:    map[string]*advSamples{},
		want:    map[string]string{},
	}
	ctx, cancel := context.WithTimeout(ctx, c.phase)
	defer cancel()
	var wg sync.WaitGroup
	for _, a := range attacks {
		s := &advSamples{}
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
				id, outcome := advCreateOrder(ctx, hc, url, "tenant-b", 100, "{ id }")
				if outcome == "canceled" {
					return
				}
				ph.victims["createOrder"].add(time.Since(start), outcome)
				if id == "" {
					continue
				}
				start = time.Now()
				outcome = advPost(ctx, hc, url, "tenant-b", fmt.Sprintf(`mutation { createPayment(idempotencyKey: %q, input: {orderID: %s, amount: 100}) { id } }`, advKey(), id), nil).outcome
				if outcome != "canceled" {
					ph.victims["createPayment"].add(time.Since(start), outcome)
				}
			}
		})
	}
	wg.Wait()
	return ph
}

// advAnswer is what a request got.
type advAnswer struct {
	outcome string
	data    json.RawMessage
}

// advPost sends one GraphQL request, once, as tenant.
func advPost(ctx context.Context, hc *http.Client, url, tenant, query string, vars map[string]any) advAnswer {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant-ID", tenant)
	res, err := hc.Do(req)
	if err != nil {
		return advAnswer{outcome: advTransportOutcome(ctx, err)}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return advAnswer{outcome: advTransportOutcome(ctx, err)} // canceled when the phase ended meanwhile, as advSend
	}
	var r gqlResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return advAnswer{outcome: fmt.Sprintf("HTTP %d, not JSON", res.StatusCode)}
	}
	if len(r.Errors) > 0 {
		code, _ := r.Errors[0].Extensions["code"].(string)
		if code == "" {
			code = "no code"
		}
		return advAnswer{outcome: code}
	}
	return advAnswer{outcome: "ok", data: r.Data}
}

// advSend sends a hostile request, once, as tenant.
func advSend(ctx context.Context, hc *http.Client, url, tenant string, r hostile.Request) string {
	res, err := hc.Do(r.NewHTTPRequest(url, tenant).WithContext(ctx))
	if err != nil {
		return advTransportOutcome(ctx, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return advTransportOutcome(ctx, err) // canceled when the phase ended meanwhile
	}
	return hostile.Outcome(res.StatusCode, body)
}

// advPostBody sends a raw body, with its length declared or chunked.
func advPostBody(ctx context.Context, hc *http.Client, url, tenant string, body []byte, declared bool) string {
	var rd io.Reader = bytes.NewReader(body)
	if !declared {
		rd = io.MultiReader(rd) // hides the length: chunked
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant-ID", tenant)
	res, err := hc.Do(req)
	if err != nil {
		return advTransportOutcome(ctx, err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return fmt.Sprintf("HTTP %d", res.StatusCode)
}

func advTransportOutcome(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return "canceled"
	}
	if strings.Contains(err.Error(), "Client.Timeout") {
		return "client timeout"
	}
	return "transport error"
}

// advCreateOrder creates an order and returns its id ("" on failure) and
// the outcome.
func advCreateOrder(ctx context.Context, hc *http.Client, url, tenant string, amount int, selection string) (string, string) {
	a := advPost(ctx, hc, url, tenant, fmt.Sprintf(`mutation { createOrder(idempotencyKey: %q, input: {amount: %d, currency: "EUR"}) %s }`, advKey(), amount, selection), nil)
	var d struct {
		CreateOrder struct{ ID string } `json:"createOrder"`
	}
	if a.outcome == "ok" && json.Unmarshal(a.data, &d) == nil {
		return d.CreateOrder.ID, a.outcome
	}
	return "", a.outcome
}

func newAdversaryOrder(ctx context.Context, hc *http.Client, url, tenant string) (string, error) {
	id, outcome := advCreateOrder(ctx, hc, url, tenant, 100, "{ id }")
	if id == "" {
		return "", fmt.Errorf("createOrder: %s", outcome)
	}
	return id, nil
}

func advKey() string { return rand.Text() }

// paddedQuery is a valid request of n bytes: a small query and spaces.
func paddedQuery(n int) []byte {
	b := bytes.Repeat([]byte(" "), n)
	copy(b, `{"query":"{ __typename }","x":"`)
	copy(b[n-2:], `"}`)
	return b
}
