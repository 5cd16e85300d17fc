package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// The README promises that `go run ./cmd/server` works on a bare machine and
// walks a newcomer through a few curl calls. This test runs the server as
// the README says, with its defaults (an embedded SQLite file in the working
// directory, no DATABASE_URL), only on a free port instead of 8080, and
// sends the README's own request bodies, read from README.md, so that the
// walk-through cannot drift from what the server does.
func TestREADMEWalkthrough(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	body := func(re string) string {
		t.Helper()
		m := regexp.MustCompile(re).FindSubmatch(readme)
		if m == nil {
			t.Fatalf("README.md has no line matching %s", re)
		}
		return string(m[1])
	}
	createOrder := body(`(?m)^q='(.*)'$`)
	createPayment := body(`(?m)^p='(.*)'$`)
	check := body(`(?m)^  -d '(\{"query":"\{ order.*)'$`)

	bin := proctest.Build(t, ".")
	t.Chdir(t.TempDir()) // where the default SQLite file goes
	addr := proctest.FreeAddr(t)
	srv := proctest.Start(t, bin, []string{"DATABASE_URL="}, []string{"-addr", addr})
	srv.WaitListening(t, addr, testkit.WaitBound)
	base := "http://" + addr

	type answer struct {
		replayed string
		data     json.RawMessage
		errors   []json.RawMessage
		outcome  string
		body     string
	}
	post := func(field, payload string) answer {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/query", strings.NewReader(payload))
		req.Header.Set("X-Tenant-ID", "acme")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var r struct {
			Data       json.RawMessage
			Errors     []json.RawMessage
			Extensions struct {
				Idempotency map[string]struct{ Outcome string }
			}
		}
		if err := json.Unmarshal(raw, &r); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", payload, res.StatusCode, raw)
		}
		return answer{res.Header.Get("Idempotent-Replayed"), r.Data, r.Errors, r.Extensions.Idempotency[field].Outcome, string(raw)}
	}

	res, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Contains(bytes.ToLower(page), []byte("graphql playground")) {
		t.Fatalf("the playground at / answered %d:\n%.300s", res.StatusCode, page)
	}

	// "The first call creates order 1. The second gets the same bytes back,
	// with Idempotent-Replayed: true."
	first, second := post("createOrder", createOrder), post("createOrder", createOrder)
	if len(first.errors) > 0 || first.outcome != "executed" || !strings.Contains(string(first.data), `"id":"1"`) {
		t.Fatalf("first createOrder: %s", first.body)
	}
	if second.outcome != "replayed" || second.replayed != "true" || !bytes.Equal(first.data, second.data) {
		t.Fatalf("second createOrder is not the first one replayed:\n%s\n%s (Idempotent-Replayed: %q)", first.body, second.body, second.replayed)
	}

	// "Now pay it, twice ... One payment, one provider charge."
	first, second = post("createPayment", createPayment), post("createPayment", createPayment)
	if len(first.errors) > 0 || first.outcome != "executed" || !strings.Contains(string(first.data), `"paid":true`) {
		t.Fatalf("first createPayment: %s", first.body)
	}
	if second.outcome != "replayed" || !bytes.Equal(first.data, second.data) {
		t.Fatalf("second createPayment is not the first one replayed:\n%s\n%s", first.body, second.body)
	}
	var state struct {
		Order struct {
			Paid     bool
			Payments []struct{ ID string }
		}
		ProviderCharges []struct {
			ID       string
			Requests int
		}
	}
	got := post("", check)
	if err := json.Unmarshal(got.data, &state); err != nil || len(got.errors) > 0 {
		t.Fatalf("%s: %v", got.body, err)
	}
	if !state.Order.Paid || len(state.Order.Payments) != 1 || len(state.ProviderCharges) != 1 || state.ProviderCharges[0].Requests != 1 {
		t.Fatalf("want the order paid once, one payment, one charge requested once: %s", got.body)
	}

	if _, err := os.Stat("idem-example.db"); err != nil {
		t.Fatalf("the default SQLite file was not made in the working directory: %v", err)
	}
}
