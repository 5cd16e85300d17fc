package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// -log-format json makes every line a JSON object; the first says the
// effective configuration; River's lines are tagged and one level lower
// (its info at debug); the failed records are logged once per change, not
// at every sweep.
func TestLogs(t *testing.T) {
	// SQLite only: the log's lines do not depend on the database (River's
	// lines apart, which MariaDB's server does not have).
	bin := proctest.Build(t, ".")
	db := idemtest.Open(t, idemtest.SQLite)
	env, args := serverDatabase(db)
	srv := startServer(t, bin, env, append(args, "-log-format", "json", "-log-level", "debug", "-sweep-every", "10ms"))
	type line struct {
		Level, Msg, Component string
		Flags                 map[string]string
	}
	lines := func() (out []line) {
		for l := range strings.Lines(srv.Output()) {
			var v line
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatalf("not JSON: %q", l)
			}
			out = append(out, v)
		}
		return out
	}
	count := func(msg string) (n int) {
		for _, l := range lines() {
			if strings.HasPrefix(l.Msg, msg) {
				n++
			}
		}
		return n
	}
	first := lines()[0]
	if first.Msg != "configuration" || first.Flags["log_format"] != "json" || first.Flags["sweep_every"] != "10ms" || first.Flags["shutdown_drain"] != "10s" ||
		first.Flags["river_max_conns"] != "4" { // River's own pool, in the connection budget
		t.Fatalf("first line: %+v", first)
	}

	// Two keys pay one order: the second is a final error, a failed record.
	order := srv.newOrder(t, "acme", "order-1")
	srv.pay("acme", "pay-1", order)
	if r := srv.pay("acme", "pay-2", order); r.code() != "ORDER_ALREADY_PAID" {
		t.Fatalf("second payment: %s", r.body)
	}
	const failed = "idempotency records failed"
	testkit.Eventually(t, func() bool { return count(failed) == 1 }, "the failed record logged")
	sweeps := count("idempotency sweep")
	testkit.Eventually(t, func() bool { return count("idempotency sweep") >= sweeps+3 }, "three sweeps more")
	if n := count(failed); n != 1 {
		t.Fatalf("the unchanged failed records logged %d times over sweeps", n)
	}
	river := 0
	for _, l := range lines() {
		if l.Component == "river" {
			river++
			if l.Level == "INFO" {
				t.Errorf("River at info: %+v", l)
			}
		}
	}
	if river == 0 {
		t.Errorf("no River line at debug:\n%s", srv.Output())
	}
}
