package idemhttp

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/refusal"
	"github.com/goovo/idem/internal/reqstate"
)

// Middleware wraps the GraphQL HTTP handler: it refuses a request body
// over l.MaxBodyBytes with HTTP 413 before reading it, notes a JSON body
// whose bytes are not UTF-8 (refused as BAD_USER_INPUT before anything
// runs, rather than changed by the JSON decoder), reads the
// Idempotency-Key and Idempotency-Retry headers for the hook, and sets the
// response headers Idempotent-Replayed, Idempotency-Key and Retry-After.
// Zero fields of l take their defaults. idem.Hook.Handler applies it.
func Middleware(next http.Handler, l Limits) http.Handler {
	l = l.withDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &reqstate.State{}
		if limit := l.MaxBodyBytes; limit > 0 {
			if r.ContentLength > limit {
				writeBodyTooLarge(w, limit)
				return
			}
			r.Body = &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit), st: st}
			st.BodyLimit = limit
		}
		if isJSON(r) {
			st.Body = &reqstate.UTF8Check{ReadCloser: r.Body}
			r.Body = st.Body
		}
		if vs := r.Header.Values(idemcode.HeaderKey); len(vs) > 0 {
			st.HasKey = true
			st.Key, st.KeyQuoted, st.KeyErr = parseKeyHeader(vs)
		}
		st.Retry = isRetry(r.Header.Get(idemcode.HeaderRetry))
		next.ServeHTTP(&headerWriter{ResponseWriter: w, st: st}, r.WithContext(reqstate.With(r.Context(), st)))
	})
}

// isRetry reads an idemcode.HeaderRetry value: a positive decimal integer.
func isRetry(v string) bool {
	n, err := strconv.ParseUint(v, 10, 32)
	return err == nil && n > 0
}

// isJSON reports a request body of JSON, the one whose decoding hides bytes
// that are not UTF-8 (reqstate.UTF8Check).
func isJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// headerWriter adds the headers before the first byte of the body; gqlgen
// writes the body after the operation has run. When the request body turned
// out too large while gqlgen read it, it answers 413 in place of gqlgen's
// answer.
type headerWriter struct {
	http.ResponseWriter
	st          *reqstate.State
	wroteHeader bool
	discard     bool // the 413 was written: drop what gqlgen writes
}

func (w *headerWriter) setHeaders() {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	if w.st.BodyTooLong.Load() {
		writeBodyTooLarge(w.ResponseWriter, w.st.BodyLimit)
		w.discard = true
		return
	}
	a := w.st.Answer()
	if a.AllReplayed {
		w.Header().Set(idemcode.HeaderReplayed, "true")
	}
	if a.EchoKey != "" {
		v := a.EchoKey
		if a.EchoQuoted {
			v = FormatKeyHeader(v)
		}
		w.Header().Set(idemcode.HeaderKey, v)
	}
	if a.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(refusal.RetryAfterSeconds(a.RetryAfter)))
	}
}

func (w *headerWriter) WriteHeader(code int) {
	w.setHeaders()
	if !w.discard {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *headerWriter) Write(b []byte) (int, error) {
	w.setHeaders()
	if w.discard {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *headerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// limitedBody reads the request body through http.MaxBytesReader and
// notes when the limit was reached, so that the response can be a 413
// whatever gqlgen makes of the read error.
type limitedBody struct {
	io.ReadCloser
	st *reqstate.State
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		b.st.BodyTooLong.Store(true)
	}
	return n, err
}
