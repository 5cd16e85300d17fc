package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// gate holds each provider charge of the server (-provider-gate) until the
// test opens it.
type gate struct {
	url     string
	entered chan struct{} // one per charge that reached the gate
	open    chan struct{}
	once    sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{entered: make(chan struct{}, 16), open: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.entered <- struct{}{}
		select {
		case <-g.open:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		g.release()
		srv.Close()
	})
	g.url = srv.URL
	return g
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// A graceful shutdown in its phases, with a payment under way: at SIGTERM
// /readyz fails at once while the server still accepts and serves new
// requests (the grace); a second signal ends the grace; the listener then
// closes and the payment under way finishes (the drain); the process exits
// 0 and logs each phase.
func TestShutdownPhases(t *testing.T) {
	bin := proctest.Build(t, ".")
	for _, b := range []idemtest.Kind{idemtest.SQLite, idemtest.Postgres, idemtest.MariaDB} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			db := idemtest.Open(t, b)
			env, args := serverDatabase(db)
			g := newGate(t)
			srv := startServer(t, bin, env, append(args, "-provider-gate", g.url, "-shutdown-grace", "10m", "-shutdown-drain", "10m"))
			base := strings.TrimSuffix(srv.url, "/query")
			order := srv.newOrder(t, "acme", "order-1")
			paid := make(chan *gqlResult, 1)
			go func() { paid <- srv.pay("acme", "pay-1", order) }()
			<-g.entered

			srv.Signal(t, syscall.SIGTERM)
			testkit.Eventually(t, func() bool {
				code, ans := getHealth(t, base+"/readyz")
				return code == http.StatusServiceUnavailable && ans.Status == "draining"
			}, "/readyz fails after SIGTERM")
			if code, _ := getHealth(t, base+"/healthz"); code != http.StatusOK {
				t.Fatalf("/healthz in the grace: %d", code)
			}
			// New connections are still served in the grace (a query: on
			// SQLite the payment under way holds the one writer).
			http.DefaultClient.CloseIdleConnections()
			if srv.paid(t, order) {
				t.Fatal("the order is paid before its payment finished")
			}

			srv.Signal(t, syscall.SIGTERM)
			addr := strings.TrimPrefix(base, "http://")
			testkit.Eventually(t, func() bool {
				c, err := net.Dial("tcp", addr)
				if err == nil {
					c.Close()
				}
				return err != nil
			}, "the listener closed once the grace ended")
			select {
			case r := <-paid:
				t.Fatalf("the payment under way answered before it was let finish: %s", r.body)
			default:
			}
			g.release()
			if r := <-paid; len(r.Errors) > 0 || !strings.Contains(r.body, `"paid":true`) {
				t.Fatalf("the payment under way at the shutdown: %s", r.body)
			}
			if err := srv.Wait(); err != nil {
				t.Fatalf("exit: %v\n%s", err, srv.Output())
			}
			out := srv.Output()
			workers := "shutdown: River stopped"
			if b == idemtest.MariaDB {
				workers = "shutdown: the workers stopped"
			}
			for _, phase := range []string{"shutdown: not ready", "a second signal ended the grace", "shutdown: draining",
				"shutdown: drained", workers, "shutdown: done"} {
				if !strings.Contains(out, phase) {
					t.Errorf("the log does not say %q:\n%s", phase, out)
				}
			}
		})
	}
}

// A request longer than the drain is cancelled and waited for, not cut by
// the database closing under it: the process exits 0, says so, and the
// payment's claim is released, so that its retry on another server runs at
// once instead of answering IDEMPOTENCY_IN_PROGRESS for a lease.
func TestShutdownCutsWhatOutlivesTheDrain(t *testing.T) {
	bin := proctest.Build(t, ".")
	for _, b := range []idemtest.Kind{idemtest.SQLite, idemtest.Postgres, idemtest.MariaDB} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			db := idemtest.Open(t, b)
			env, args := serverDatabase(db)
			g := newGate(t)
			srv := startServer(t, bin, env, append(args, "-provider-gate", g.url, "-shutdown-drain", "1ms", "-lease", "10m"))
			order := srv.newOrder(t, "acme", "order-1")
			paid := make(chan *gqlResult, 1)
			go func() { paid <- srv.pay("acme", "pay-1", order) }()
			<-g.entered

			srv.Signal(t, syscall.SIGTERM)
			if err := srv.Wait(); err != nil {
				t.Fatalf("exit: %v\n%s", err, srv.Output())
			}
			<-paid
			out := srv.Output()
			for _, phase := range []string{"the drain ran out", "the cancelled requests returned", "shutdown: done"} {
				if !strings.Contains(out, phase) {
					t.Errorf("the log does not say %q:\n%s", phase, out)
				}
			}
			if strings.Contains(out, "database is closed") {
				t.Errorf("a statement was cut by the database closing:\n%s", out)
			}
			next := startServer(t, bin, env, args)
			g.release()
			if r := next.pay("acme", "pay-1", order); len(r.Errors) > 0 || !strings.Contains(r.body, `"paid":true`) {
				t.Fatalf("the retry of the cut payment on another server: %s", r.body)
			}
		})
	}
}
