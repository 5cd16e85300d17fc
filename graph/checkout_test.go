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
	get("/", "text/html") // the playground
}
