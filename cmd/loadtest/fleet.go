package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// serverPackage is the example server the tool runs.
const serverPackage = "github.com/goovo/idem/cmd/server"

// buildServer compiles the example server into dir.
func buildServer(dir string) (string, error) {
	bin := filepath.Join(dir, "server")
	out, err := exec.Command("go", "build", "-o", bin, serverPackage).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s (run from the module, or pass -server-bin): %v\n%s", serverPackage, err, out)
	}
	return bin, nil
}

// profile is how the simulated payment provider of one server process
// behaves.
type profile struct {
	name            string
	latency         time.Duration // before the charge executes
	responseLatency time.Duration // after it executed: a crash or timeout here leaves money charged and books unwritten
	failureRate     float64
}

func (p profile) args() []string {
	return []string{
		"-provider-latency", p.latency.String(),
		"-provider-response-latency", p.responseLatency.String(),
		"-provider-failure-rate", fmt.Sprint(p.failureRate),
	}
}

// fleet is the set of server processes of a run, all on one database:
// every subcommand starts, kills, restarts and stops its servers through
// one.
type fleet struct {
	bin     string
	env     []string // DATABASE_URL
	args    []string // flags every server gets
	logDir  string
	newPort bool // a restarted server listens on a new port
	// bare: the servers take args only, neither a River client id nor the
	// provider's flags: the test application's server of the anchor, which
	// has no provider and no River, and the adversary's and the soak's
	// servers, which run with the example server's defaults.
	bare bool
	// noRiver: the servers run no River (on MariaDB), and refuse its
	// client id.
	noRiver bool

	mu      sync.Mutex
	servers []*server
}

// server is one slot of the fleet: the process currently in it, if any.
type server struct {
	index   int
	addr    string
	profile profile
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	starts  int
}

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// add starts a new server in the next slot.
func (f *fleet) add(ctx context.Context, p profile) error {
	f.mu.Lock()
	s := &server{index: len(f.servers), profile: p}
	f.servers = append(f.servers, s)
	f.mu.Unlock()
	return f.start(ctx, s)
}

// start runs the slot's process and waits until it accepts connections. A
// server waits for a database that does not answer yet (-db-connect-timeout),
// but one restarted between that wait and its migration exits, so start
// tries again until a minute has passed.
func (f *fleet) start(ctx context.Context, s *server) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := f.startOnce(s)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("server %d: %w", s.index, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (f *fleet) startOnce(s *server) error {
	f.mu.Lock()
	addr := s.addr
	f.mu.Unlock()
	if addr == "" || f.newPort && s.starts > 0 {
		var err error
		if addr, err = freeAddr(); err != nil {
			return err
		}
	}
	logf, err := os.OpenFile(filepath.Join(f.logDir, fmt.Sprintf("server-%d.log", s.index)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own descriptor
	args := append([]string{"-addr", addr}, f.args...)
	if !f.bare && !f.noRiver {
		// The slot's River client id: unique among the running servers,
		// the same across the slot's restarts.
		riverID := fmt.Sprintf("loadtest-%s-%d", filepath.Base(f.logDir), s.index)
		args = append(args, "-river-id", riverID)
	}
	if !f.bare {
		args = append(args, s.profile.args()...)
	}
	fmt.Fprintf(logf, "=== loadtest: start %s %s\n", f.bin, strings.Join(args, " "))
	cmd := exec.Command(f.bin, args...)
	cmd.Env = append(os.Environ(), f.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	for wait := time.Now().Add(20 * time.Second); ; {
		select {
		case <-exited:
			return fmt.Errorf("exited at start (see %s)", logf.Name())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			break
		}
		if time.Now().After(wait) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("does not listen on %s (see %s)", addr, logf.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.mu.Lock()
	s.addr, s.cmd, s.exited = addr, cmd, exited
	s.starts++
	f.mu.Unlock()
	return nil
}

// url returns the GraphQL endpoint of slot i. While the slot's server is
// down, requests to it are refused, as they would be in production.
func (f *fleet) url(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return "http://" + f.servers[i%len(f.servers)].addr + "/query"
}

// pids returns the process ids of the running servers.
func (f *fleet) pids() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var pids []int
	for _, s := range f.servers {
		if s.cmd != nil {
			pids = append(pids, s.cmd.Process.Pid)
		}
	}
	return pids
}

func (f *fleet) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.servers)
}

// kill sends SIGKILL to slot i's process: no graceful shutdown, open
// transactions die with their connections, committed pending claims stay.
// The slot's next start runs profile next.
func (f *fleet) kill(i int, next profile) {
	f.mu.Lock()
	s := f.servers[i]
	cmd, exited := s.cmd, s.exited
	s.cmd, s.profile = nil, next
	f.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
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

// restart starts slot i again (on the same port unless newPort).
func (f *fleet) restart(ctx context.Context, i int) error {
	f.mu.Lock()
	s := f.servers[i]
	f.mu.Unlock()
	return f.start(ctx, s)
}

// stop ends every process: SIGTERM, then SIGKILL after a grace period.
func (f *fleet) stop() {
	f.mu.Lock()
	var procs []*server
	for _, s := range f.servers {
		if s.cmd != nil {
			procs = append(procs, &server{cmd: s.cmd, exited: s.exited})
			s.cmd = nil
		}
	}
	f.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
}

// logPattern names the log lines that contain all of its parts.
type logPattern struct {
	label string
	parts []string
}

func (p logPattern) match(line []byte) bool {
	for _, part := range p.parts {
		if !bytes.Contains(line, []byte(part)) {
			return false
		}
	}
	return true
}

// logCounts counts the lines of every server log by the first pattern they
// match.
func (f *fleet) logCounts(patterns []logPattern) map[string]int {
	counts := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(f.logDir, "server-*.log"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			for _, p := range patterns {
				if p.match(line) {
					counts[p.label]++
					break
				}
			}
		}
	}
	return counts
}

// backend is a database that the adversary and the soak run a single
// server on.
type backend struct {
	name string
	env  []string // DATABASE_URL and PROVIDER_DATABASE_URL
	args []string
}

// backends are SQLite, in a file of the run's named after tool, and the
// run's PostgreSQL.
func backends(e *runEnv, tool string) []backend {
	return []backend{
		{"sqlite", []string{"DATABASE_URL=", "PROVIDER_DATABASE_URL="}, []string{"-db", filepath.Join(e.tmp, tool+".db")}},
		{"postgres", e.db.serverEnv(nil), nil},
	}
}

// start starts a fleet of one bare server on b, with args; its log goes to
// a directory of its own, tool-backend.
func (b backend) start(e *runEnv, tool string, args []string) (*fleet, error) {
	f := &fleet{bin: e.bin, env: b.env, args: slices.Concat(args, b.args), logDir: filepath.Join(e.tmp, tool+"-"+b.name), bare: true}
	if err := os.MkdirAll(f.logDir, 0o755); err != nil {
		return nil, err
	}
	if err := f.add(e.ctx, profile{name: tool}); err != nil {
		f.stop()
		return nil, err
	}
	return f, nil
}
