// Package reqstate carries the facts of one HTTP request that its
// middleware (idemhttp.Middleware) and the engine share: what the request
// said (its Idempotency-Key header, whether it says it is a retry, whether
// its body outgrew the limit or is not UTF-8) and what the operation
// learned for the response's headers (every field replayed, the key to
// echo, a retry delay).
package reqstate

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// State is one request's. The middleware sets the fields before the
// operation runs; the answer goes back through SetAnswer.
type State struct {
	// HasKey: the request sent the Idempotency-Key header; Key is its key,
	// KeyQuoted whether it was a structured-field String, KeyErr why it is
	// malformed (an *idemcode.Error).
	HasKey    bool
	Key       string
	KeyQuoted bool
	KeyErr    error
	// Retry: the request says it retries an earlier one
	// (idemcode.HeaderRetry).
	Retry bool

	// BodyLimit is the body's limit; BodyTooLong is set when the body
	// reached it while being read.
	BodyLimit   int64
	BodyTooLong atomic.Bool
	// Body checks a JSON body's bytes for UTF-8 as gqlgen reads them (on
	// the request's goroutine, before the operation is checked); nil for
	// other bodies.
	Body *UTF8Check

	mu     sync.Mutex
	answer Answer
}

// Answer is what the response's headers say of the operation's
// idempotent fields.
type Answer struct {
	// AllReplayed: every idempotent field was replayed.
	AllReplayed bool
	// EchoKey is the key of the operation's only idempotent field;
	// EchoQuoted says to send it as a structured-field String.
	EchoKey    string
	EchoQuoted bool
	// RetryAfter is set when every idempotent field is in progress.
	RetryAfter time.Duration
}

// SetAnswer records what the operation learned.
func (s *State) SetAnswer(a Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = a
}

// Answer returns what SetAnswer recorded.
func (s *State) Answer() Answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answer
}

type stateKey struct{}

// With returns ctx carrying s.
func With(ctx context.Context, s *State) context.Context {
	return context.WithValue(ctx, stateKey{}, s)
}

// From returns the state in ctx, or nil outside an HTTP request served
// through the middleware.
func From(ctx context.Context) *State {
	s, _ := ctx.Value(stateKey{}).(*State)
	return s
}

// UTF8Check reads a request body and notes whether its bytes are UTF-8,
// as they stream past, keeping only the bytes of a character split between
// two reads. encoding/json replaces each byte that is not UTF-8 with
// U+FFFD: the client's text would be changed, not refused.
type UTF8Check struct {
	io.ReadCloser
	partial []byte // the start of a character the last read split
	invalid bool
}

// Invalid reports whether the bytes read so far are not UTF-8.
func (c *UTF8Check) Invalid() bool { return c.invalid }

// Read implements io.Reader.
func (c *UTF8Check) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if !c.invalid {
		c.scan(p[:n], err != nil)
	}
	return n, err
}

// scan checks b, which follows what was scanned before; end says no bytes
// follow it.
func (c *UTF8Check) scan(b []byte, end bool) {
	// Complete the character the last read split, a byte at a time: a
	// byte that cannot continue it makes it whole, and invalid.
	for len(c.partial) > 0 && len(b) > 0 {
		c.partial = append(c.partial, b[0])
		b = b[1:]
		if utf8.FullRune(c.partial) {
			if r, size := utf8.DecodeRune(c.partial); r == utf8.RuneError && size <= 1 {
				c.invalid = true
				return
			}
			c.partial = c.partial[:0]
		}
	}
	// A character split at the end of b waits for the next read.
	cut := len(b)
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	if !utf8.Valid(b[:cut]) {
		c.invalid = true
		return
	}
	c.partial = append(c.partial, b[cut:]...)
	if end && len(c.partial) > 0 {
		c.invalid = true
	}
}

// recovererKey marks the context of an operation the recoverer runs
// (Config.RecoverAfter). Only this process sets it: a client cannot.
type recovererKey struct{}

// WithRecoverer marks ctx as the recoverer's run of a claim, for which no
// client waits.
func WithRecoverer(ctx context.Context) context.Context {
	return context.WithValue(ctx, recovererKey{}, true)
}

// Recoverer reports whether ctx is the recoverer's run of a claim
// (WithRecoverer).
func Recoverer(ctx context.Context) bool {
	v, _ := ctx.Value(recovererKey{}).(bool)
	return v
}
