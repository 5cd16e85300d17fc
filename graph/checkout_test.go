package graph_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/goovo/idem/idemtest"
)

// The checkout page and the JavaScript client it imports come from the
// binary, with the types a browser needs to run them as ES modules, and
// every module the page imports, directly or not, is there: a page with no
// bundler and no CDN has nowhere else to find one. The playground stays at
// /. (clients/js/test/browser.test.mjs runs the page in Chromium.)
func TestCheckoutPageIsServed(t *testing.T) {
	a := newApp(t, idemtest.SQLite)
	get := func(path, wantType string) string {
		t.Helper()
		res, err := http.Get(a.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), wantType) {
			t.Fatalf("GET %s: %d %s, want 200 %s", path, res.StatusCode, res.Header.Get("Content-Type"), wantType)
		}
		return string(body)
	}
	page := get("/checkout/", "text/html")
	if !strings.Contains(page, `<script type="module" src="checkout.js">`) {
		t.Fatalf("the page does not load checkout.js:\n%s", page)
	}
	imports := regexp.MustCompile(`\bfrom "\./([^"]+)"`)
	seen := map[string]bool{}
	var load func(dir, file string)
	load = func(dir, file string) {
		if seen[dir+file] {
			return
		}
		seen[dir+file] = true
		src := get("/checkout/"+dir+file, "text/javascript")
		for _, m := range imports.FindAllStringSubmatch(src, -1) {
			d, f := dir, m[1]
			if i := strings.LastIndex(f, "/"); i >= 0 {
				d, f = d+f[:i+1], f[i+1:]
			}
			load(d, f)
		}
	}
	load("", "checkout.js")
	for _, want := range []string{"idem/index.js", "idem/fetch.js", "idem/intents.js", "idem/codes.js"} {
		if !seen[want] {
			t.Errorf("the page does not import %s (imports: %v)", want, seen)
		}
	}
}

// Issue 32: the page at / works with no network beyond the server (gqlgen's
// playground loaded React and GraphiQL from a CDN), and a path the server
// does not serve is 404 (/ answered every one with 200, /debug/pprof/
// included).
func TestPlaygroundNeedsNoNetworkAndUnknownPathsAre404(t *testing.T) {
	a := newApp(t, idemtest.SQLite)
	get := func(path string) (int, string, string) {
		t.Helper()
		res, err := http.Get(a.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("Content-Type"), string(body)
	}
	status, ctype, page := get("/")
	if status != http.StatusOK || !strings.HasPrefix(ctype, "text/html") {
		t.Fatalf("GET /: %d %s", status, ctype)
	}
	// Every script, style sheet and image the page loads is the server's.
	refs := regexp.MustCompile(`(?i)\b(?:src|href)="([^"]*)"`)
	for _, m := range refs.FindAllStringSubmatch(page, -1) {
		if strings.Contains(m[1], "//") {
			t.Errorf("the page at / loads %s from elsewhere", m[1])
		}
		if status, _, _ := get("/" + strings.TrimPrefix(m[1], "/")); status != http.StatusOK {
			t.Errorf("the page at / loads %s, which answers %d", m[1], status)
		}
	}
	if !strings.Contains(page, `src="playground.js"`) {
		t.Errorf("the page does not load its script:\n%s", page)
	}
	for _, path := range []string{"/nope", "/debug/pprof/", "/index.html", "/query/x", "/checkout.js"} {
		if status, _, body := get(path); status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404: %.100s", path, status, body)
		}
	}
}
