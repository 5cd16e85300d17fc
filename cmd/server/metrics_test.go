package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// The metrics an alert needs exist before their first event: every
// counter of every @idempotent field at zero (the recoverer's failures
// apart from clients'), the claims past their lease per table; beside them
// OpenTelemetry's HTTP server and Go runtime metrics, the pools' and the
// service's name. A claim whose lease ended shows in the gauge.
func TestMetricsExistAtZero(t *testing.T) {
	bin := proctest.Build(t, ".")
	for _, b := range []idemtest.Kind{idemtest.SQLite, idemtest.Postgres, idemtest.MariaDB} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			db := idemtest.Open(t, b)
			env, args := serverDatabase(db)
			metricsAddr := proctest.FreeAddr(t)
			srv := startServer(t, bin, env, append(args, "-metrics-addr", metricsAddr))
			metricsURL := "http://" + metricsAddr + "/metrics"
			var page string
			testkit.Eventually(t, func() bool {
				res, err := http.Get(metricsURL)
				if err != nil {
					return false
				}
				defer res.Body.Close()
				body, _ := io.ReadAll(res.Body)
				page = string(body)
				return true
			}, "the metrics are served")
			for _, want := range []string{
				`idem_compensated_total{idem_field="createPayment",`,
				`idem_recovered_total{idem_field="createPayment",`,
				`idem_abandoned_total{idem_field="createPayment",`,
				`idem_claims_total{idem_field="createPayment",idem_mode="LEASE",`,
				`idem_failures_total{idem_failure="final",idem_field="createPayment",idem_origin="client",`,
				`idem_failures_total{idem_failure="final",idem_field="createPayment",idem_origin="recoverer",`,
				`idem_refusals_total{idem_code="IDEMPOTENCY_UNAVAILABLE",idem_field="createPayment",`,
				`idem_claims_past_lease{idem_table="payments",`,
				`idem_sweep_promised{idem_table="payments",`,
			} {
				if v, ok := sample(page, want); !ok || v != "0" {
					t.Errorf("before any request: %s… is %q (present: %v), want 0", want, v, ok)
				}
			}
			// The shared PostgreSQL has no synchronous standby: a failover
			// could lose answers (0); SQLite has nothing to say.
			if v, ok := sample(page, `idem_replication_synchronous{`); b.IsPostgres() && v != "0" || !b.IsPostgres() && ok {
				t.Errorf("idem_replication_synchronous is %q (present: %v)", v, ok)
			}
			for _, want := range []string{`target_info{service_name="idem-example",`, `go_goroutine_count{`,
				`db_client_connection_max{db_client_connection_pool_name="app",`} {
				if _, ok := sample(page, want); !ok {
					t.Errorf("no %s…", want)
				}
			}

			order := srv.newOrder(t, "acme", "order-1")
			if r := srv.pay("acme", "pay-1", order); len(r.Errors) > 0 {
				t.Fatal(r.body)
			}
			// The payment's claim as a dead process leaves it: pending, its
			// lease ended.
			q := `UPDATE payments SET idempotency_status = 'pending', idempotency_completed_at = NULL, idempotency_lease_expires_at = ? WHERE idempotency_key = 'pay-1'`
			arg := any("2000-01-01 00:00:00")
			if b.IsPostgres() {
				q = strings.ReplaceAll(q, "?", "'2000-01-01'")
				arg = nil
			}
			var err error
			if arg != nil {
				_, err = db.Driver.DB().ExecContext(context.Background(), q, arg)
			} else {
				_, err = db.Driver.DB().ExecContext(context.Background(), q)
			}
			if err != nil {
				t.Fatal(err)
			}
			res, err := http.Get(metricsURL)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			page = string(body)
			if v, _ := sample(page, `idem_claims_past_lease{idem_table="payments",`); v != "1" {
				t.Errorf("claims past their lease in payments: %q, want 1", v)
			}
			if v, _ := sample(page, `idem_claims_total{idem_field="createPayment",idem_mode="LEASE",`); v != "1" {
				t.Errorf("payment claims: %q, want 1", v)
			}
			if _, ok := sample(page, `http_server_request_duration_seconds_count{`); !ok {
				t.Errorf("no HTTP server duration after requests")
			}
			// Every metric the alert rules and the dashboard's panels name
			// exists on the server.
			for _, file := range []string{"../../ops/prometheus/alerts.yml", "../../ops/grafana/idem.json"} {
				text, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				names := regexp.MustCompile(`\b(idem|http_server|db_client|go)_[a-z_]+\b`).FindAllString(string(text), -1)
				if len(names) < 5 {
					t.Fatalf("%s names %d metrics: %v", file, len(names), names)
				}
				for _, name := range names {
					if labels[name] {
						continue
					}
					if _, ok := sample(page, name+"{"); !ok {
						t.Errorf("%s names %s, which the server does not export", file, name)
					}
				}
			}
		})
	}
}

// labels are the label names the rules and the dashboard use, which the
// metric pattern also matches.
var labels = map[string]bool{"idem_field": true, "idem_table": true, "idem_code": true, "idem_origin": true, "idem_failure": true,
	"idem_mode": true, "db_client_connection_state": true, "http_response_status_code": true}

// sample returns the value of the first sample of page whose line begins
// with prefix (a metric name and its first labels).
func sample(page, prefix string) (string, bool) {
	for line := range strings.Lines(page) {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			return f[len(f)-1], true
		}
	}
	return "", false
}
