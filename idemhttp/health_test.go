package idemhttp_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/goovo/idem/idemdb"
	"github.com/goovo/idem/idemhttp"
)

// Readiness follows its checks: a database that closes makes it fail, and
// Drain makes it fail whatever they say; liveness holds throughout.
func TestHealth(t *testing.T) {
	drv, err := idemdb.OpenSQL(filepath.Join(t.TempDir(), "health.db"), idemdb.Pool{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	h := idemhttp.NewHealth(idemhttp.PingCheck("database", drv.DB()))
	mux := http.NewServeMux()
	h.Mount(mux)
	get := func(path string) (int, idemhttp.HealthAnswer) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var a idemhttp.HealthAnswer
		if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
			t.Fatalf("%s: %s", path, rec.Body)
		}
		return rec.Code, a
	}
	if code, a := get(idemhttp.PathReady); code != http.StatusOK || a.Status != "ready" || a.Checks[0] != (idemhttp.CheckResult{Name: "database", Status: "ok"}) {
		t.Fatalf("ready: %d %+v", code, a)
	}
	drv.DB().Close()
	if code, a := get(idemhttp.PathReady); code != http.StatusServiceUnavailable || a.Status != "not ready" || a.Checks[0].Status != "failing" {
		t.Fatalf("database closed: %d %+v", code, a)
	}
	h.Drain()
	if code, a := get(idemhttp.PathReady); code != http.StatusServiceUnavailable || a.Status != "draining" {
		t.Fatalf("draining: %d %+v", code, a)
	}
	if code, a := get(idemhttp.PathLive); code != http.StatusOK || a.Status != "alive" {
		t.Fatalf("live while draining: %d %+v", code, a)
	}
}
