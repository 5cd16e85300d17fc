package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/goovo/idem/idemclient"
	"github.com/goovo/idem/idemcode"
)

// Every code the server can answer with is either retried by Do or final
// for the intent, as idemcode classifies it, also when another field of the
// same operation asks for a retry: a final refusal wins.
func TestEveryCodeIsClassified(t *testing.T) {
	for _, code := range idemcode.All() {
		t.Run(string(code), func(t *testing.T) {
			alone := gqlErr(string(code), "refused", "")
			// The code on field a, IDEMPOTENCY_IN_PROGRESS on field b.
			withInProgress := `{"errors":[{"message":"a","path":["a"],"extensions":{"code":"` + string(code) + `"}},` +
				`{"message":"b","path":["b"],"extensions":{"code":"IDEMPOTENCY_IN_PROGRESS","retryAfterSeconds":0}}],"data":null}`
			for _, body := range []string{alone, withInProgress} {
				s := newStub(t, reply{body: body}, reply{body: okBody})
				c := &idemclient.Client{URL: s.URL, BaseBackoff: 1, MaxBackoff: 1}
				res, err := c.Do(context.Background(), idemclient.Request{Query: mutation, Key: "k"})
				if code.Retryable() {
					if err != nil || s.requests() != 2 {
						t.Fatalf("%s is retryable: want a retry and success, got %d requests, %v", body, s.requests(), err)
					}
					continue
				}
				var re *idemclient.ResponseError
				if !errors.As(err, &re) || s.requests() != 1 || res.Code() != string(code) {
					t.Fatalf("%s is final: want it returned after one request, got %d requests, %v", body, s.requests(), err)
				}
			}
		})
	}
}

// The codes the client once hard-coded drifted from the server's; now both
// take them from idemcode. These three were missing, so the client retried
// them as if they could change.
func TestFormerlyUnknownCodesAreFinal(t *testing.T) {
	for _, code := range []idemcode.Code{idemcode.RequestTooLarge, idemcode.ResponseNotStored, idemcode.BadUserInput} {
		if !code.Final() {
			t.Errorf("%s is not final", code)
		}
	}
}

// idemclient stays importable without the server's dependencies: the
// standard library, idemcode, and internal/timer (the module's one way to
// wait, which imports the standard library only) only.
func TestImportsOnlyTheStandardLibraryAndIdemcode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Standard   bool
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		switch {
		case p.Standard, p.ImportPath == "github.com/goovo/idem/idemclient", p.ImportPath == "github.com/goovo/idem/idemcode",
			p.ImportPath == "github.com/goovo/idem/internal/timer":
		default:
			t.Errorf("idemclient depends on %s", p.ImportPath)
		}
	}
}
