// Package outcome is the mark a resolver's error carries to say how its
// attempt ends: Final (stored and replayed) or Retryable (rolled back and
// released). idem.Final and idem.Retryable make the marks; the engine and
// the error presenter read them.
package outcome

import "errors"

// Final marks err as a final result of the mutation.
func Final(err error) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, final: true}
}

// Retryable marks err as a transient failure.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, final: false}
}

// Marked reports whether err's chain carries a mark, and whether the
// outermost one is Final.
func Marked(err error) (marked, final bool) {
	var m *markedError
	if errors.As(err, &m) {
		return true, m.final
	}
	return false, false
}

// IsFinal reports whether the outermost mark in err's chain is Final.
func IsFinal(err error) bool {
	_, final := Marked(err)
	return final
}

// IsRetryable reports whether the outermost mark in err's chain is
// Retryable.
func IsRetryable(err error) bool {
	marked, final := Marked(err)
	return marked && !final
}

type markedError struct {
	err   error
	final bool
}

func (e *markedError) Error() string { return e.err.Error() }
func (e *markedError) Unwrap() error { return e.err }
