// Package proctest is test support for the tests that run the project's
// commands as real processes (cmd/server, cmd/idemctl, cmd/migrate): it
// builds a command once per test binary, starts it with its output
// captured, waits until it listens, and kills it with SIGKILL, which no
// in-process test can do.
//
// It imports testing and is meant for _test.go files only.
package proctest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// builds holds, by package, a func that builds the package on its first
// call and returns the same binary (or error) on every later one: the
// tests of a package run in parallel and share one build.
var builds sync.Map // string → func() (string, error)

// Build builds the command pkg, as `go build` takes it (an import path, or a
// directory relative to the test's working directory, such as "." for the
// package under test), once per test binary, and returns the binary's path.
// A failed build fails every test that asks for it.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	f, _ := builds.LoadOrStore(pkg, sync.OnceValues(func() (string, error) { return build(pkg) }))
	bin, err := f.(func() (string, error))()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Cleanup removes the binaries Build made. Call it from TestMain after
// m.Run: a test binary has no other way to run code once all its tests
// ended, and each build is tens of megabytes.
func Cleanup() {
	dirs.Range(func(dir, _ any) bool {
		_ = os.RemoveAll(dir.(string))
		return true
	})
}

// dirs holds the directories of the builds, for Cleanup.
var dirs sync.Map

func build(pkg string) (string, error) {
	dir, err := os.MkdirTemp("", "proctest")
	if err != nil {
		return "", err
	}
	dirs.Store(dir, true)
	// The binary is named after the package, so that a process listing
	// during a test shows which command is which.
	name := path.Base(pkg)
	if pkg == "." || pkg == ".." || strings.HasPrefix(pkg, "./") || strings.HasPrefix(pkg, "../") {
		abs, err := filepath.Abs(pkg)
		if err != nil {
			return "", err
		}
		name = filepath.Base(abs)
	}
	bin := filepath.Join(dir, name)
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// Process is a command started by Start. The test's cleanup kills it if it
// is still running.
type Process struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{} // closed once the process has exited and been waited for
	err    error         // Wait's answer, set before exited is closed
}

// Start starts bin with args, its environment the test's plus env, its
// standard output and error captured together (Output).
func Start(t testing.TB, bin string, env, args []string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	p := &Process{cmd: cmd, out: &lockedBuffer{}, exited: make(chan struct{})}
	// One writer for both streams: exec then copies them in one goroutine
	// at a time, and Output sees them interleaved as they were written.
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Waited for at once, so that Exited and Wait can tell when it ends on
	// its own.
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if !p.Exited() {
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// WaitListening waits until addr accepts TCP connections. The test fails,
// with the process's output, if the process exits first or timeout passes.
func (p *Process) WaitListening(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		if p.Exited() {
			t.Fatalf("%s exited before it listened on %s: %v\n%s", filepath.Base(p.cmd.Path), addr, p.err, p.Output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s within %v:\n%s", filepath.Base(p.cmd.Path), addr, timeout, p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// FreeAddr returns a loopback address (127.0.0.1:port) for a process to
// listen on (with its -addr flag, say): the kernel picked the port for a
// listener that is closed again, so it was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Kill sends SIGKILL to the process and waits until it has exited. It
// reports whether the signal is what ended it: false if the process exited
// on its own just before (Wait tells how). The test fails if the signal
// cannot be sent for another reason.
func (p *Process) Kill(t testing.TB) bool {
	t.Helper()
	// os.ErrProcessDone: the process exited and Start's goroutine has
	// already waited for it. Had it not yet, the signal would have reached
	// the zombie without error; either way the exit status says what
	// happened, so that case is not a failure.
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	<-p.exited
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// Signal sends sig to the process (SIGTERM, to test a graceful shutdown).
func (p *Process) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// Exited reports whether the process has exited (and been waited for).
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Done is closed once the process has exited; Wait then returns at once.
func (p *Process) Done() <-chan struct{} { return p.exited }

// Wait waits until the process has exited and returns exec.Cmd.Wait's
// error: nil for exit status 0.
func (p *Process) Wait() error {
	<-p.exited
	return p.err
}

// Output returns what the process has written so far to its standard
// output and error.
func (p *Process) Output() string { return p.out.String() }

// lockedBuffer is a bytes.Buffer that Output may read while the process
// writes to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
