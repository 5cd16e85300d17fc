package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// The server answers /healthz while it runs, and /readyz while its
// database, its claim tables and River answer: with the payments table gone
// (renamed), readiness fails naming the claims check and liveness holds;
// once the table is back, the server is ready again by itself. The
// playground can be turned off.
func TestHealthAndReadiness(t *testing.T) {
	bin := proctest.Build(t, ".")
	for _, b := range []idemtest.Kind{idemtest.SQLite, idemtest.Postgres, idemtest.MariaDB} {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			db := idemtest.Open(t, b)
			env, args := serverDatabase(db)
			srv := startServer(t, bin, env, append(args, "-playground=false"))
			base := strings.TrimSuffix(srv.url, "/query")

			if code, ans := getHealth(t, base+"/healthz"); code != http.StatusOK || ans.Status != "alive" {
				t.Fatalf("/healthz: %d %+v", code, ans)
			}
			code, ans := getHealth(t, base+"/readyz")
			if code != http.StatusOK || ans.Status != "ready" || checkStatus(ans, "database") != "ok" ||
				checkStatus(ans, "claims") != "ok" || checkStatus(ans, workersCheck(b)) != "ok" {
				t.Fatalf("/readyz: %d %+v", code, ans)
			}
			if res, err := http.Get(base + "/"); err != nil || res.StatusCode != http.StatusNotFound {
				t.Fatalf("GET / with -playground=false: %v %v", res, err)
			} else {
				res.Body.Close()
			}

			exec := func(q string) {
				if _, err := db.Driver.DB().ExecContext(context.Background(), q); err != nil {
					t.Fatal(err)
				}
			}
			exec(`ALTER TABLE payments RENAME TO payments_away`)
			testkit.Eventually(t, func() bool {
				code, ans = getHealth(t, base+"/readyz")
				return code == http.StatusServiceUnavailable
			}, "/readyz fails without the payments table")
			if ans.Status != "not ready" || checkStatus(ans, "claims") != "failing" || checkStatus(ans, "database") != "ok" {
				t.Fatalf("/readyz without the payments table: %+v", ans)
			}
			if code, _ := getHealth(t, base+"/healthz"); code != http.StatusOK {
				t.Fatalf("/healthz without the payments table: %d", code)
			}
			exec(`ALTER TABLE payments_away RENAME TO payments`)
			testkit.Eventually(t, func() bool {
				code, _ = getHealth(t, base+"/readyz")
				return code == http.StatusOK
			}, "/readyz answers again with the table back")
			// The log reaches the test through a pipe after the answer does.
			testkit.Eventually(t, func() bool {
				out := srv.Output()
				return strings.Contains(out, "readiness check failing") && strings.Contains(out, "readiness check answers again")
			}, "the log says when readiness failed and came back")
		})
	}
}

// workersCheck is the readiness check of the server's workers on b: River,
// or on MariaDB, where River does not run, the receipt workers.
func workersCheck(b idemtest.Kind) string {
	if b == idemtest.MariaDB {
		return "workers"
	}
	return "river"
}

// healthAnswer is the JSON of /healthz and /readyz.
type healthAnswer struct {
	Status string
	Checks []struct{ Name, Status string }
}

func checkStatus(a healthAnswer, name string) string {
	for _, c := range a.Checks {
		if c.Name == name {
			return c.Status
		}
	}
	return ""
}

func getHealth(t *testing.T, url string) (int, healthAnswer) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var a healthAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("%s: %d %s", url, res.StatusCode, body)
	}
	return res.StatusCode, a
}
