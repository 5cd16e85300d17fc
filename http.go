package idem

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/99designs/gqlgen/graphql/handler"
)

// HTTP header names.
const (
	// HeaderReplayed is set to "true" on a response in which every
	// idempotent field was replayed from its record.
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderKey carries the key (IETF draft-ietf-httpapi-idempotency-key-header).
	HeaderKey = "Idempotency-Key"
)

// Install makes srv's @idempotent mutations retry-safe: it adds the hook to
// the server and returns the handler to serve, which also sets the
// Idempotent-Replayed response header.
//
//	srv := handler.New(graph.NewExecutableSchema(cfg))
//	srv.AddTransport(transport.POST{})
//	h, err := idem.Install(srv, idem.Config{
//		Backend: client.IdempotencyBackend(),
//		Tenant:  tenantFromContext,
//	})
//	http.Handle("/query", h)
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
	srv.Use(ext)
	return ext.Middleware(srv), nil
}

// Middleware wraps the GraphQL HTTP handler so that responses carry the
// Idempotent-Replayed header. Install applies it; use it directly when
// adding the extension with srv.Use.
func (e *Extension) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &httpState{}
		if vs, ok := r.Header[HeaderKey]; ok && len(vs) > 0 {
			st.requestKey, st.hasRequestKey = vs[0], true
			st.requestKeys = len(vs)
		}
		ctx := context.WithValue(r.Context(), httpStateKey{}, st)
		next.ServeHTTP(&headerWriter{ResponseWriter: w, st: st}, r.WithContext(ctx))
	})
}

type httpStateKey struct{}

// httpState carries the request's Idempotency-Key header to the hook, and
// what the operation learned back to the response headers.
type httpState struct {
	requestKey    string
	hasRequestKey bool
	requestKeys   int // how many Idempotency-Key headers were sent

	mu          sync.Mutex
	allReplayed bool
	echoKey     string
}

func httpStateFrom(ctx context.Context) *httpState {
	st, _ := ctx.Value(httpStateKey{}).(*httpState)
	return st
}

// headerWriter adds the headers before the first byte of the body; gqlgen
// writes the body after the operation has run.
type headerWriter struct {
	http.ResponseWriter
	st          *httpState
	wroteHeader bool
}

func (w *headerWriter) setHeaders() {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	w.st.mu.Lock()
	defer w.st.mu.Unlock()
	if w.st.allReplayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	if w.st.echoKey != "" {
		w.Header().Set(HeaderKey, w.st.echoKey)
	}
}

func (w *headerWriter) WriteHeader(code int) {
	w.setHeaders()
	w.ResponseWriter.WriteHeader(code)
}

func (w *headerWriter) Write(b []byte) (int, error) {
	w.setHeaders()
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
	http   *httpState
	mu     sync.Mutex
	fields map[string]FieldReport
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
// idempotent field was, and the key echoed when there was one field.
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
	op.http.mu.Lock()
	op.http.allReplayed, op.http.echoKey = all, echo
	op.http.mu.Unlock()
}
