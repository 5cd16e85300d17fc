package idem

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem/idemcode"
)

// HTTP header names.
const (
	// HeaderReplayed is set to "true" on a response in which every
	// idempotent field was replayed from its record.
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderKey carries the key (IETF draft-ietf-httpapi-idempotency-key-header):
	// a structured-field String ("abc") or a bare key (see ParseKeyHeader).
	// The response echoes the key of an operation's only idempotent field in
	// the form of the request's header, or quoted.
	HeaderKey = "Idempotency-Key"
	// HeaderRetry marks a request as a retry of an earlier one with the
	// same keys: a positive integer, the retry's number (1 for the first
	// retry), as idemclient sends it. It is a hint and decides nothing: the
	// hook looks the keys up before claiming them (one statement that
	// reads, where a claim of a key that has a record sends an insert that
	// writes nothing with it), which saves a retry that reaches another
	// process than the one that stored the key about a third of its
	// cost, and costs a retry whose first attempt never reached the
	// database one round trip. A value that is not a positive integer is
	// ignored.
	HeaderRetry = "Idempotency-Retry"
)

// Install makes srv's @idempotent mutations retry-safe and bounds what a
// request may ask for. It sets the server's error presenter and recover
// function (Extension.ErrorPresenter, Extension.RecoverFunc: put your own
// presenter in Config.ErrorPresenter), adds the document limits
// (OperationLimits, which run before gqlgen parses and validates, and
// gqlgen's parser token limit), gqlgen's complexity limit and the hook,
// adds a last transport that answers a request no other transport serves
// with BAD_REQUEST, and returns the handler to serve, which bounds the
// request body and sets the response headers (Extension.Middleware).
//
//	srv := handler.New(graph.NewExecutableSchema(cfg))
//	srv.AddTransport(transport.POST{})
//	h, err := idem.Install(srv, idem.Config{
//		Backend: client.IdempotencyBackend(),
//		Tenant:  tenantFromContext,
//	})
//	http.Handle("/query", h)
//
// Add transports before Install, and extensions that work on the operation
// (a complexity limit of your own, say) after it, so that the limits see the
// operation first; an extension that rewrites the query
// (extension.AutomaticPersistedQuery) goes before Install.
func Install(srv *handler.Server, cfg Config) (_ http.Handler, err error) {
	ext, err := New(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		// gqlgen panics when an extension rejects the schema.
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	srv.SetErrorPresenter(ext.ErrorPresenter())
	srv.SetRecoverFunc(ext.RecoverFunc())
	l := ext.cfg.Limits
	srv.Use(NewOperationLimits(l))
	if l.MaxTokens > 0 {
		srv.SetParserTokenLimit(l.MaxTokens)
	}
	if l.MaxComplexity > 0 {
		srv.Use(extension.FixedComplexityLimit(l.MaxComplexity))
	}
	srv.Use(ext)
	srv.AddTransport(unsupportedTransport{})
	h := ext.Middleware(srv)
	if cfg.RecoverAfter > 0 {
		go ext.RunRecoverer(doneContext(cfg.Done))
	}
	return h, nil
}

// unsupportedTransport is the transport Install adds last, so that gqlgen
// gives it the requests no other transport takes (a GET where only POST
// was added, another Content-Type): gqlgen itself answers them with an
// error without a code.
type unsupportedTransport struct{}

var _ graphql.Transport = unsupportedTransport{}

// Supports implements graphql.Transport.
func (unsupportedTransport) Supports(*http.Request) bool { return true }

// Do implements graphql.Transport: HTTP 400, BAD_REQUEST.
func (unsupportedTransport) Do(w http.ResponseWriter, _ *http.Request, _ graphql.GraphExecutor) {
	body, _ := json.Marshal(&graphql.Response{Errors: gqlerror.List{{
		Message:    "no transport of this GraphQL endpoint takes the request (its method, Content-Type or Upgrade header); a GraphQL request is a POST with Content-Type: application/json",
		Extensions: map[string]any{"code": string(idemcode.BadRequest)},
	}}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
}

// doneContext is a context that ends when done is closed (never, when it
// is nil).
func doneContext(done <-chan struct{}) context.Context {
	if done == nil {
		return context.Background()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-done
		cancel()
	}()
	return ctx
}

// Middleware wraps the GraphQL HTTP handler: it refuses a request body
// over Limits.MaxBodyBytes with HTTP 413 before reading it, notes a JSON
// body whose bytes are not UTF-8 (refused as BAD_USER_INPUT before
// anything runs, rather than changed by the JSON decoder), reads the
// Idempotency-Key header, and sets the response headers Idempotent-Replayed,
// Idempotency-Key and Retry-After. Install applies it; use it directly when
// adding the extension with srv.Use.
func (e *Extension) Middleware(next http.Handler) http.Handler {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &httpState{}
		if limit := e.cfg.Limits.MaxBodyBytes; limit > 0 {
			if r.ContentLength > limit {
				writeBodyTooLarge(w, limit)
				return
			}
			r.Body = &limitedBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit), st: st}
			st.bodyLimit = limit
		}
		if isJSON(r) {
			st.body = &utf8Check{ReadCloser: r.Body}
			r.Body = st.body
		}
		if vs := r.Header.Values(HeaderKey); len(vs) > 0 {
			st.hasRequestKey = true
			st.requestKey, st.requestQuoted, st.headerErr = parseKeyHeader(vs)
		}
		st.retry = isRetry(r.Header.Get(HeaderRetry))
		ctx := context.WithValue(r.Context(), httpStateKey{}, st)
		next.ServeHTTP(&headerWriter{ResponseWriter: w, st: st}, r.WithContext(ctx))
	})
	// The recoverer (Config.RecoverAfter) runs claims through it.
	e.recovery.setHandler(h)
	return h
}

type httpStateKey struct{}

// httpState carries the request's Idempotency-Key header to the hook, and
// what the operation learned back to the response headers.
type httpState struct {
	requestKey    string
	requestQuoted bool  // the header's key was a structured-field String
	headerErr     error // the header is malformed
	hasRequestKey bool
	retry         bool // the request says it retries an earlier one (HeaderRetry)

	bodyLimit   int64
	bodyTooLong atomic.Bool // the body reached the limit while being read
	// body checks a JSON body's bytes for UTF-8 as gqlgen reads them (on
	// the request's goroutine, before the operation is checked).
	body *utf8Check

	mu          sync.Mutex
	allReplayed bool
	echoKey     string
	echoQuoted  bool
	retryAfter  time.Duration // every idempotent field is in progress
}

func httpStateFrom(ctx context.Context) *httpState {
	st, _ := ctx.Value(httpStateKey{}).(*httpState)
	return st
}

// isRetry reads a HeaderRetry value: a positive decimal integer.
func isRetry(v string) bool {
	n, err := strconv.ParseUint(v, 10, 32)
	return err == nil && n > 0
}

// retried reports whether the request said it is a retry (HeaderRetry).
func retried(ctx context.Context) bool {
	st := httpStateFrom(ctx)
	return st != nil && st.retry
}

// headerWriter adds the headers before the first byte of the body; gqlgen
// writes the body after the operation has run. When the request body turned
// out too large while gqlgen read it, it answers 413 in place of gqlgen's
// answer.
type headerWriter struct {
	http.ResponseWriter
	st          *httpState
	wroteHeader bool
	discard     bool // the 413 was written: drop what gqlgen writes
}

func (w *headerWriter) setHeaders() {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	if w.st.bodyTooLong.Load() {
		writeBodyTooLarge(w.ResponseWriter, w.st.bodyLimit)
		w.discard = true
		return
	}
	w.st.mu.Lock()
	defer w.st.mu.Unlock()
	if w.st.allReplayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	if w.st.echoKey != "" {
		v := w.st.echoKey
		if w.st.echoQuoted {
			v = FormatKeyHeader(v)
		}
		w.Header().Set(HeaderKey, v)
	}
	if w.st.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(w.st.retryAfter)))
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

// Outcomes of an idempotent field, as reported in
// extensions.idempotency.<field>.outcome. A client retries with the same key
// after OutcomeReleased and after the refusals that say so
// (IDEMPOTENCY_IN_PROGRESS, IDEMPOTENCY_UNAVAILABLE); the others are final
// for the key.
const (
	// OutcomeExecuted: the mutation ran and its result (data or a final
	// error) was stored.
	OutcomeExecuted = "executed"
	// OutcomeReplayed: the stored result of an earlier request.
	OutcomeReplayed = "replayed"
	// OutcomeReleased: the mutation failed with a retryable error; nothing
	// was stored and the key is free for a retry.
	OutcomeReleased = "released"
	// OutcomeRefused: the hook answered with one of its errors (see the
	// error's code) without running the mutation.
	OutcomeRefused = "refused"
)

type operationKey struct{}

// operation collects the idempotent fields of one GraphQL operation.
type operation struct {
	http       *httpState
	mu         sync.Mutex
	fields     map[string]FieldReport
	inProgress map[string]time.Duration // fields answered IDEMPOTENCY_IN_PROGRESS, their retry delay
}

// FieldReport is what extensions.idempotency says of one idempotent field,
// under the field's response name.
type FieldReport struct {
	// Key is the field's idempotency key.
	Key string `json:"key"`
	// Outcome is one of the Outcome constants.
	Outcome string `json:"outcome"`
	// Replayed is Outcome == OutcomeReplayed.
	Replayed bool `json:"replayed"`
}

func operationFrom(ctx context.Context) *operation {
	op, _ := ctx.Value(operationKey{}).(*operation)
	return op
}

func (op *operation) record(alias, key, outcome string) {
	if op == nil {
		return
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.fields == nil {
		op.fields = map[string]FieldReport{}
	}
	op.fields[alias] = FieldReport{Key: key, Outcome: outcome, Replayed: outcome == OutcomeReplayed}
}

// report hands the headers' facts to the HTTP layer: replayed when every
// idempotent field was, the key echoed when there was one field (in the
// form of the request's header, or as the draft's quoted string), and a
// retry delay when every field is in progress.
func (op *operation) report() {
	if op.http == nil {
		return
	}
	all := len(op.fields) > 0
	var echo string
	for _, f := range op.fields {
		all = all && f.Replayed
		echo = f.Key
	}
	if len(op.fields) != 1 {
		echo = ""
	}
	var retryAfter time.Duration
	if len(op.inProgress) == len(op.fields) {
		for _, d := range op.inProgress {
			retryAfter = max(retryAfter, d)
		}
	}
	op.http.mu.Lock()
	op.http.allReplayed, op.http.echoKey, op.http.retryAfter = all, echo, retryAfter
	op.http.echoQuoted = echo != "" && !(op.http.hasRequestKey && echo == op.http.requestKey && !op.http.requestQuoted)
	op.http.mu.Unlock()
}

// inProgressFor records that the field answered IDEMPOTENCY_IN_PROGRESS
// with this retry delay.
func (op *operation) inProgressFor(alias string, retryAfter time.Duration) {
	if op == nil {
		return
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.inProgress == nil {
		op.inProgress = map[string]time.Duration{}
	}
	op.inProgress[alias] = retryAfter
}
