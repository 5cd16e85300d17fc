package idemhttp

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// A ReadinessCheck is one thing a process needs before it can serve: its
// database, its claim tables, a job queue. Check returns nil when it
// answers; its error is logged for the operator and never sent to the
// caller of /readyz, which sees the check's Name and "failing".
type ReadinessCheck struct {
	// Name names the check in /readyz's answer and in the log: "database".
	Name string
	// Check asks once, within ctx (Health.Timeout).
	Check func(ctx context.Context) error
}

// PingCheck is a ReadinessCheck of name that pings db.
func PingCheck(name string, db *sql.DB) ReadinessCheck {
	return ReadinessCheck{Name: name, Check: db.PingContext}
}

// DefaultCheckTimeout bounds each readiness check (Health.Timeout).
const DefaultCheckTimeout = 2 * time.Second

// Health serves a process's liveness (/healthz: the process runs and
// answers HTTP, nothing else: an orchestrator restarts a process that
// fails it, which would not bring a database back) and readiness
// (/readyz: each of the application's ReadinessChecks answers, and the
// process is not shutting down: a load balancer sends requests only to a
// ready process). Each answer is JSON, HTTP 200 or 503:
//
//	{"status":"ready","checks":[{"name":"database","status":"ok"}]}
//	{"status":"draining"}
//
// The checks are the application's: a process without a job queue passes
// none for it. Health is safe for concurrent use.
type Health struct {
	// Timeout bounds each check; DefaultCheckTimeout when zero. A check
	// past it fails: an orchestrator's probe has a timeout of its own.
	Timeout time.Duration
	// Logger logs each failing check with its error (slog.Default when
	// nil), once per change of the check's state, not at every probe.
	Logger *slog.Logger

	checks   []ReadinessCheck
	draining atomic.Bool
	mu       sync.Mutex
	failing  map[string]bool // the checks that failed at their last run
}

// NewHealth returns the Health of a process that is ready while every one
// of checks answers.
func NewHealth(checks ...ReadinessCheck) *Health {
	return &Health{checks: checks, failing: map[string]bool{}}
}

// Paths at which Mount serves Health.
const (
	PathLive  = "/healthz"
	PathReady = "/readyz"
)

// Mount serves liveness at PathLive and readiness at PathReady on mux (GET
// and HEAD).
func (h *Health) Mount(mux *http.ServeMux) {
	mux.Handle("GET "+PathLive, h.Live())
	mux.Handle("GET "+PathReady, h.Ready())
}

// Live is the liveness handler: HTTP 200 for as long as the process
// serves, shutdown included (the orchestrator must not kill a process
// that is draining).
func (h *Health) Live() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeHealth(w, http.StatusOK, HealthAnswer{Status: "alive"})
	})
}

// Ready is the readiness handler: HTTP 200 when every check answered
// within Timeout, 503 when one did not or the process is draining
// (Drain).
func (h *Health) Ready() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.Draining() {
			writeHealth(w, http.StatusServiceUnavailable, HealthAnswer{Status: "draining"})
			return
		}
		ans := h.Check(r.Context())
		code := http.StatusOK
		if ans.Status != "ready" {
			code = http.StatusServiceUnavailable
		}
		writeHealth(w, code, ans)
	})
}

// Drain makes readiness fail from now on, whatever the checks say: the
// first phase of a graceful shutdown, which tells the load balancer to
// stop sending requests while the process still serves those that come.
func (h *Health) Drain() { h.draining.Store(true) }

// Draining reports whether Drain was called.
func (h *Health) Draining() bool { return h.draining.Load() }

// HealthAnswer is the JSON body of /healthz and /readyz: Status is
// "alive" (liveness), "ready", "not ready" or "draining" (readiness),
// with each check's result.
type HealthAnswer struct {
	Status string        `json:"status"`
	Checks []CheckResult `json:"checks,omitempty"`
}

// CheckResult is one check's answer in /readyz: Status "ok" or "failing".
type CheckResult struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// Check runs every check at once, each within Timeout, and returns
// readiness as /readyz answers it (without the draining state): Status
// "ready" or "not ready". A failing check's error is logged when it
// starts failing, and its recovery when it answers again.
func (h *Health) Check(ctx context.Context) (ans HealthAnswer) {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	results := make([]CheckResult, len(h.checks))
	errs := make([]error, len(h.checks))
	var wg sync.WaitGroup
	for i, c := range h.checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			errs[i] = c.Check(cctx)
			results[i] = CheckResult{Name: c.Name, Status: "ok"}
			if errs[i] != nil {
				results[i].Status = "failing"
			}
		})
	}
	wg.Wait()
	ans = HealthAnswer{Status: "ready", Checks: results}
	logger := h.Logger
	if logger == nil {
		logger = slog.Default()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, c := range h.checks {
		failing := errs[i] != nil
		if failing {
			ans.Status = "not ready"
		}
		if failing == h.failing[c.Name] {
			continue
		}
		h.failing[c.Name] = failing
		if failing {
			logger.Warn("readiness check failing", slog.String("check", c.Name), slog.Any("error", errs[i]))
		} else {
			logger.Info("readiness check answers again", slog.String("check", c.Name))
		}
	}
	return ans
}

func writeHealth(w http.ResponseWriter, code int, ans HealthAnswer) {
	body, _ := json.Marshal(ans)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}
