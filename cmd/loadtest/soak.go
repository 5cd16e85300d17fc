package main

// loadtest soak: does the server give back what hostile traffic made it
// take? It starts one example server per backend (SQLite in a
// file of its own, then PostgreSQL in the run's schema), with its default
// limits and its connection timeouts shortened (-conn-timeout), so
// that an hour's turnover of slow and idle connections fits in
// -duration. For that long it sends, all at once:
//
//   - large distinct documents (just under the body limit: never cached)
//     and medium distinct ones (under the document cache's size limit:
//     cached until the cache's byte budget pushes them out);
//   - slow bodies (a byte every 100 ms, never finished) and idle
//     keep-alive connections (one request, then nothing), each reopened
//     when the server closes it, and left open when the traffic stops:
//     the server has to close them itself;
//   - invalid input: every request of package hostile's catalogue, fresh
//     each time, and ids and amounts the server must refuse;
//   - honest traffic: keyed createOrder then createPayment, each retried
//     with the same key (a transport error, IDEMPOTENCY_IN_PROGRESS) and
//     sent again once more to check the replay answers the same id.
//
// It samples the server process's resident memory (VmRSS in
// /proc/PID/status), its open file descriptors (/proc/PID/fd) and its
// goroutines (go_goroutine_count on its -metrics-addr, up to 15 s old)
// before the traffic, every second during it, and after it until each is
// back within its margin of where it started (soakMargins), at least 16 s
// (a goroutine count from after the traffic) and at most -settle
// more. It
// exits 1 when one is not back by then, when an honest request did not get
// its result, or when a hostile request got anything but its refusal.
//
//	go run ./cmd/loadtest soak -duration 30s   # scripts/test
//	go run ./cmd/loadtest soak -duration 10m   # for docs/limits.md

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goovo/idem/internal/testkit/hostile"
)

// soakConfig holds the flags of loadtest soak.
type soakConfig struct {
	duration    time.Duration
	settle      time.Duration
	connTimeout time.Duration
	slowConns   int
	idleConns   int
}

func defineSoak(fs *flag.FlagSet) command {
	c := &soakConfig{}
	fs.DurationVar(&c.duration, "duration", time.Minute, "how long the traffic runs on each backend")
	fs.DurationVar(&c.settle, "settle", time.Minute, "how long the server has, after the traffic, to come back within the margins")
	fs.DurationVar(&c.connTimeout, "conn-timeout", 2*time.Second, "the server's -read-header-timeout, -read-timeout and -idle-timeout (its defaults are minutes: shortened so that connections turn over within the run)")
	fs.IntVar(&c.slowConns, "slow-conns", 50, "connections kept sending a body a byte at a time")
	fs.IntVar(&c.idleConns, "idle-conns", 50, "keep-alive connections kept idle")
	return c
}

func (c *soakConfig) check(*flag.FlagSet, *dbConfig) error {
	if c.duration <= 0 || c.settle <= 0 || c.connTimeout <= 0 || c.slowConns < 0 || c.idleConns < 0 {
		return errors.New("-duration, -settle and -conn-timeout must be positive, -slow-conns and -idle-conns not negative")
	}
	return nil
}

func (c *soakConfig) needs() needs { return needs{server: true} }

// soakMargins are how far above its start a figure may stay once the
// traffic has stopped. Memory: the document cache's budget (16 MiB, kept
// on purpose), the heap's room to grow before the next collection
// (GOGC=100: as much again), and what the runtime has not yet given back
// to the system (measured: 20 to 53 MB above the start); far below what an
// unbounded cache kept (the 900 kB documents alone, half a gigabyte); descriptors: a few database connections (a pool opens
// one late, up to its bounded size; the client connections are all
// closed); goroutines: a few, for those connections and the pools'
// background work.
var soakMargins = soakSample{rss: 96 << 20, fds: 8, goroutines: 16}

// goroutineStaleness is how old the goroutine count the metrics export
// can be: OpenTelemetry's runtime instrumentation reads the runtime at
// most every 15 s.
const goroutineStaleness = 15 * time.Second

// soakSample is one sample of the server process.
type soakSample struct {
	rss        int64 // bytes
	fds        int
	goroutines int
}

func (s soakSample) String() string {
	return fmt.Sprintf("RSS %5.1f MB, %4d fds, %4d goroutines", float64(s.rss)/1e6, s.fds, s.goroutines)
}

// within reports whether s is no more than margin above start, and says
// what is not.
func (s soakSample) within(start, margin soakSample) (bool, string) {
	var over []string
	if s.rss > start.rss+margin.rss {
		over = append(over, fmt.Sprintf("RSS %.1f MB > %.1f MB + %.1f MB", float64(s.rss)/1e6, float64(start.rss)/1e6, float64(margin.rss)/1e6))
	}
	if s.fds > start.fds+margin.fds {
		over = append(over, fmt.Sprintf("fds %d > %d + %d", s.fds, start.fds, margin.fds))
	}
	if s.goroutines > start.goroutines+margin.goroutines {
		over = append(over, fmt.Sprintf("goroutines %d > %d + %d", s.goroutines, start.goroutines, margin.goroutines))
	}
	return len(over) == 0, strings.Join(over, ", ")
}

// run runs the soak on SQLite, then on PostgreSQL.
func (c *soakConfig) run(e *runEnv) error {
	fmt.Printf("soak: %v of hostile and honest traffic per backend, connection timeouts %v; margins after it: %s above the start\n",
		c.duration, c.connTimeout, soakMargins)
	var failed []string
	for _, b := range backends(e, "soak") {
		metricsAddr, err := freeAddr()
		if err != nil {
			return err
		}
		t := c.connTimeout.String()
		f, err := b.start(e, "soak", []string{"-sweep-every", "0", "-materialize-every", "0", "-metrics-addr", metricsAddr,
			"-read-header-timeout", t, "-read-timeout", t, "-idle-timeout", t})
		if err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		problems, err := soakOne(e.ctx, c, f, "http://"+metricsAddr+"/metrics")
		f.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		for _, p := range problems {
			failed = append(failed, b.name+": "+p)
		}
	}
	if err := e.ctx.Err(); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("soak:\n  %s", strings.Join(failed, "\n  "))
	}
	fmt.Println("\nsoak: every honest request got its result, every hostile one its refusal, and memory, file descriptors and goroutines came back within their margins")
	return nil
}

// soakCounts counts what one kind of traffic got.
type soakCounts struct {
	mu         sync.Mutex
	outcomes   map[string]int
	firstError string // the first transport error's text
}

func (s *soakCounts) add(outcome string) {
	if rest, ok := strings.CutPrefix(outcome, "transport error: "); ok {
		s.mu.Lock()
		if s.firstError == "" {
			s.firstError = rest
		}
		s.mu.Unlock()
		outcome = "transport error"
	}
	s.mu.Lock()
	if s.outcomes == nil {
		s.outcomes = map[string]int{}
	}
	s.outcomes[outcome]++
	s.mu.Unlock()
}

func (s *soakCounts) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	n := 0
	for k, v := range s.outcomes {
		out = append(out, fmt.Sprintf("%s %d", k, v))
		n += v
	}
	if s.firstError != "" {
		out = append(out, "the first transport error: "+s.firstError)
	}
	return fmt.Sprintf("%6d: %s", n, strings.Join(out, ", "))
}

// soakKinds are the kinds of traffic whose answers the soak counts, in
// the order of its report; soakHonestKinds, those of the honest traffic.
var (
	soakKinds       = []string{"large document", "medium document", "invalid input", "slow body", "idle keep-alive"}
	soakHonestKinds = []string{"createOrder", "createPayment", "replay differs"}
)

// soakRun is the soak of one server.
type soakRun struct {
	c      *soakConfig
	cl     *client
	url    string
	sample func() (soakSample, error)
	honest map[string]*soakCounts // by soakHonestKinds
	kinds  map[string]*soakCounts // by soakKinds

	n         atomic.Int64 // makes every document distinct
	peak      soakSample
	catalogue []hostile.Request

	wrongMu sync.Mutex
	wrong   []string // answers other than expected, the first 20

	// Connections the traffic left open when it stopped, as an attacker
	// would: the server must close them itself.
	heldMu sync.Mutex
	held   []net.Conn
}

// soakOne soaks one server and returns what went wrong.
func soakOne(ctx context.Context, c *soakConfig, f *fleet, metricsURL string) ([]string, error) {
	pid := f.pids()[0]
	scrape := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	r := &soakRun{
		c: c, cl: newSingleClient(f, time.Minute), url: f.url(0),
		sample: func() (soakSample, error) { return sampleProcess(ctx, pid, scrape, metricsURL) },
		honest: map[string]*soakCounts{}, kinds: map[string]*soakCounts{},
	}
	defer r.cl.http.CloseIdleConnections()
	defer r.closeHeld()
	r.reset()
	order := "1"
	if id, _ := r.cl.createOrder(ctx, "tenant-a", 100); id != "" {
		order = id
	}
	r.catalogue = hostile.Catalogue(order)
	// The start: after a moment of the same traffic, so that the
	// connection pools have grown to what this traffic makes them (a
	// bounded size, not a leak) and the runtime is as a running server
	// has it.
	r.traffic(ctx, 3*time.Second)
	r.closeHeld()
	window := c.connTimeout + goroutineStaleness + time.Second
	start, err := settle(ctx, r.sample, nil, soakSample{}, window, window+c.settle)
	if err != nil {
		return nil, fmt.Errorf("before the traffic: %w", err)
	}
	fmt.Printf("\n== soak: %s\n  start:  %s\n", r.url, start)
	r.reset()
	r.traffic(ctx, c.duration)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fmt.Printf("  peak:   %s\n", r.peak)

	began := time.Now()
	end, err := settle(ctx, r.sample, &start, soakMargins, goroutineStaleness+time.Second, goroutineStaleness+c.settle)
	var problems []string
	if err != nil {
		problems = append(problems, err.Error())
	}
	fmt.Printf("  after:  %s (%v after the traffic stopped)\n", end, time.Since(began).Round(100*time.Millisecond))
	return append(problems, r.report()...), nil
}

// reset forgets the counts (not the first transport error, nor the wrong
// answers) and the peak.
func (r *soakRun) reset() {
	for _, m := range []struct {
		counts map[string]*soakCounts
		kinds  []string
	}{{r.kinds, soakKinds}, {r.honest, soakHonestKinds}} {
		for _, k := range m.kinds {
			if m.counts[k] == nil {
				m.counts[k] = &soakCounts{}
			}
			m.counts[k].outcomes = nil
		}
	}
	r.peak = soakSample{}
}

// want counts an answer of kind, and notes it when it is not the expected
// one.
func (r *soakRun) want(kind, outcome, expected string) {
	r.kinds[kind].add(outcome)
	if outcome != expected && outcome != "canceled" {
		r.wrongMu.Lock()
		if len(r.wrong) < 20 {
			r.wrong = append(r.wrong, fmt.Sprintf("%s: %s, not %s", kind, outcome, expected))
		}
		r.wrongMu.Unlock()
	}
}

func (r *soakRun) hold(c net.Conn) { r.heldMu.Lock(); r.held = append(r.held, c); r.heldMu.Unlock() }

func (r *soakRun) closeHeld() {
	r.heldMu.Lock()
	for _, c := range r.held {
		c.Close()
	}
	r.held = nil
	r.heldMu.Unlock()
}

// traffic sends every kind of traffic for d and samples the process every
// second meanwhile.
func (r *soakRun) traffic(ctx context.Context, d time.Duration) {
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	// Documents the server has not seen: 900 kB (under the body limit,
	// over the cache's size limit) and 40 kB (cached).
	for _, d := range []struct {
		kind string
		size int
	}{{"large document", 900 << 10}, {"medium document", 40 << 10}} {
		wg.Go(func() {
			for tctx.Err() == nil {
				q := fmt.Sprintf("{ __typename } # %d %s", r.n.Add(1), strings.Repeat("x", d.size))
				r.want(d.kind, r.cl.query(tctx, "tenant-a", q).outcome, "ok")
			}
		})
	}
	wg.Go(func() { r.invalid(tctx) })
	addr := strings.TrimSuffix(strings.TrimPrefix(r.url, "http://"), "/query")
	for range r.c.slowConns {
		wg.Go(func() {
			for tctx.Err() == nil {
				r.kinds["slow body"].add(soakSlowBody(tctx, addr, r.hold))
			}
		})
	}
	for range r.c.idleConns {
		wg.Go(func() {
			for tctx.Err() == nil {
				r.kinds["idle keep-alive"].add(soakIdle(tctx, addr, r.hold))
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for tctx.Err() == nil {
				soakHonest(tctx, r.cl, r.honest)
			}
		})
	}
	wg.Go(func() { r.samplePeak(tctx) })
	wg.Wait()
	r.cl.http.CloseIdleConnections()
}

// invalid sends invalid input until ctx ends: the catalogue, fresh each
// time, and ids and amounts the server refuses in its own words.
func (r *soakRun) invalid(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		switch i % 3 {
		case 0:
			h := r.catalogue[rand.IntN(len(r.catalogue))]
			r.want("invalid input", r.cl.hostile(ctx, "tenant-a", h.Fresh(int(r.n.Add(1)))), h.Want)
		case 1:
			r.want("invalid input", r.cl.query(ctx, "tenant-a", `{ order(id: "abc") { id } }`).outcome, "BAD_USER_INPUT")
		case 2:
			r.want("invalid input", r.cl.query(ctx, "tenant-a",
				fmt.Sprintf(`mutation { createOrder(idempotencyKey: %q, input: {amount: 2147483648, currency: "EUR"}) { id } }`, newKey())).outcome,
				"BAD_USER_INPUT")
		}
	}
}

// samplePeak samples the process every second until ctx ends, keeping
// the largest figures.
func (r *soakRun) samplePeak(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if s, err := r.sample(); err == nil {
			r.peak = soakSample{max(r.peak.rss, s.rss), max(r.peak.fds, s.fds), max(r.peak.goroutines, s.goroutines)}
		}
	}
}

// report prints what each kind of traffic got and returns what went wrong.
func (r *soakRun) report() []string {
	for _, k := range soakKinds {
		fmt.Printf("  %-16s %s\n", k, r.kinds[k])
	}
	for _, k := range soakHonestKinds {
		fmt.Printf("  %-16s %s\n", k, r.honest[k])
	}
	var problems []string
	differ := r.honest["replay differs"]
	differ.mu.Lock()
	if d := len(differ.outcomes); d > 0 {
		problems = append(problems, "a replay answered another id than its first answer")
	}
	differ.mu.Unlock()
	for _, k := range []string{"createOrder", "createPayment"} {
		r.honest[k].mu.Lock()
		for o, v := range r.honest[k].outcomes {
			if o != "ok" && o != "canceled" {
				problems = append(problems, fmt.Sprintf("honest %s: %d answers %s after their retries", k, v, o))
			}
		}
		r.honest[k].mu.Unlock()
	}
	return append(problems, r.wrong...)
}

// settle samples the process every 250 ms until the sample is within
// margin of start, and window has passed (the goroutine count can be that
// old), or, with start nil, until the descriptors and goroutines have not
// changed for window (longer than the connection timeouts: the start), for
// at most bound, and returns the last sample.
func settle(ctx context.Context, sample func() (soakSample, error), start *soakSample, margin soakSample, window, bound time.Duration) (soakSample, error) {
	began := time.Now()
	deadline := began.Add(bound)
	var prev soakSample
	stableSince := time.Now()
	for i := 0; ; i++ {
		s, err := sample()
		if err != nil {
			return s, err
		}
		if start == nil {
			if i == 0 || s.fds != prev.fds || s.goroutines != prev.goroutines {
				stableSince = time.Now()
			} else if time.Since(stableSince) >= window {
				return s, nil
			}
		} else if ok, _ := s.within(*start, margin); ok && time.Since(began) >= window {
			return s, nil
		}
		prev = s
		if time.Now().After(deadline) {
			if start == nil {
				return s, fmt.Errorf("the server did not settle in %v", bound)
			}
			_, why := s.within(*start, margin)
			return s, fmt.Errorf("not back within the margins %v after the traffic: %s", bound, why)
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// sampleProcess reads the process's VmRSS and descriptors from /proc and
// its goroutines from its metrics.
func sampleProcess(ctx context.Context, pid int, hc *http.Client, metricsURL string) (soakSample, error) {
	var s soakSample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return s, fmt.Errorf("VmRSS: %w", err)
			}
			s.rss = kb << 10
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = len(fds)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	res, err := hc.Do(req)
	if err != nil {
		return s, fmt.Errorf("metrics: %w", err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "go_goroutine_count") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				return s, fmt.Errorf("metrics: %q: %w", line, err)
			}
			s.goroutines = int(v)
			return s, nil
		}
	}
	return s, errors.New("metrics: no go_goroutine_count")
}

// soakHonest creates an order and pays it, each with a key of its own,
// retried with that key until it has a result, then sent once more: the
// replay must answer the same id.
func soakHonest(ctx context.Context, cl *client, counts map[string]*soakCounts) {
	send := func(field, query string) string {
		var id string
		outcome := ""
		for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
			a := cl.query(ctx, "tenant-b", query)
			outcome = a.outcome
			if outcome == "ok" {
				var d map[string]struct{ ID string }
				if json.Unmarshal(a.data, &d) == nil {
					id = d[field].ID
				}
				break
			}
			if outcome != "transport error" && outcome != "client timeout" && outcome != "IDEMPOTENCY_IN_PROGRESS" {
				break
			}
			time.Sleep(50 * time.Millisecond) // a retry's backoff
		}
		if ctx.Err() != nil {
			outcome = "canceled"
		}
		counts[field].add(outcome)
		if id != "" {
			again := cl.query(ctx, "tenant-b", query)
			var d map[string]struct{ ID string }
			if again.outcome == "ok" && json.Unmarshal(again.data, &d) == nil && d[field].ID != id {
				counts["replay differs"].add(field)
			}
		}
		return id
	}
	order := send("createOrder", fmt.Sprintf(`mutation { createOrder(idempotencyKey: %q, input: {amount: 100, currency: "EUR"}) { id } }`, newKey()))
	if order == "" {
		return
	}
	send("createPayment", paymentQuery(newKey(), order))
}

// soakSlowBody opens a connection, declares a body of 1 MB and sends it a
// byte every 100 ms until the server closes the connection (its read
// timeout) or ctx ends, when it gives the connection, open, to hold. It
// returns how it ended.
func soakSlowBody(ctx context.Context, addr string, hold func(net.Conn)) string {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return "canceled"
		}
		return "transport error: " + err.Error()
	}
	if _, err := fmt.Fprintf(conn, "POST /query HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n", addr); err != nil {
		conn.Close()
		return transportOutcome(ctx, err)
	}
	closed := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, conn); close(closed) }()
	for {
		select {
		case <-closed:
			conn.Close()
			return "closed by the server"
		case <-ctx.Done():
			hold(conn)
			return "left open"
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := conn.Write([]byte(" ")); err != nil {
			<-closed
			conn.Close()
			return "closed by the server"
		}
	}
}

// soakIdle opens a keep-alive connection, sends one request on it, reads
// the answer, and waits until the server closes it (its idle timeout) or
// ctx ends, when it gives the connection, open, to hold.
func soakIdle(ctx context.Context, addr string, hold func(net.Conn)) string {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return "canceled"
		}
		return "transport error: " + err.Error()
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Now()) })
	body := `{"query":"{ __typename }"}`
	if _, err := fmt.Fprintf(conn, "POST /query HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body); err != nil {
		conn.Close()
		return transportOutcome(ctx, err)
	}
	rd := bufio.NewReader(conn)
	res, err := http.ReadResponse(rd, nil)
	if err != nil {
		conn.Close()
		return transportOutcome(ctx, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	_, err = rd.ReadByte()
	if !stop() && ctx.Err() != nil {
		_ = conn.SetReadDeadline(time.Time{})
		hold(conn)
		return "left open"
	}
	defer conn.Close()
	if err == io.EOF {
		return "closed by the server"
	} else if err != nil {
		return transportOutcome(ctx, err)
	}
	return "the server sent more"
}
