package idem_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
)

func TestFinalAndRetryable(t *testing.T) {
	base := errors.New("amount must be positive")
	cases := []struct {
		name  string
		err   error
		final bool
	}{
		{"unmarked", base, false},
		{"final", idem.Final(base), true},
		{"wrapped final", fmt.Errorf("pay: %w", idem.Final(base)), true},
		{"retryable", idem.Retryable(base), false},
		{"retryable over final", idem.Retryable(idem.Final(base)), false},
		{"final over retryable", idem.Final(idem.Retryable(base)), true},
	}
	for _, c := range cases {
		if got := idem.IsFinal(c.err); got != c.final {
			t.Errorf("%s: IsFinal = %v", c.name, got)
		}
		if !errors.Is(c.err, base) {
			t.Errorf("%s: the marker hides the error", c.name)
		}
		if c.err.Error() != base.Error() && c.name != "wrapped final" {
			t.Errorf("%s: the marker changes the message: %q", c.name, c.err.Error())
		}
	}
	if idem.Final(nil) != nil || idem.Retryable(nil) != nil {
		t.Error("marking nil is not nil")
	}
}

func TestErrorsCompareByCode(t *testing.T) {
	err := fmt.Errorf("serve: %w", &idemcode.Error{Code: idemcode.InProgress, Key: "k", Message: "busy"})
	if !errors.Is(err, idem.ErrInProgress) {
		t.Fatal("errors.Is by code fails")
	}
	if errors.Is(err, idem.ErrKeyReused) {
		t.Fatal("errors.Is matches another code")
	}
}

func ExampleFinal() {
	validate := func(amount int) error {
		if amount <= 0 {
			// Stored and replayed to every retry of the key.
			return idem.Final(errors.New("amount must be positive"))
		}
		return nil
	}
	err := validate(0)
	fmt.Println(err, idem.IsFinal(err))
	// Output: amount must be positive true
}

func ExampleValidateKey() {
	for _, key := range []string{"7c0b7d0e-4c1f-4f2b-9a57-6d1f5b0e2a11", "", "clé"} {
		fmt.Println(idem.ValidateKey(key) == nil)
	}
	// Output:
	// true
	// false
	// false
}
