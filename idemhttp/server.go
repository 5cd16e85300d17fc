package idemhttp

import (
	"encoding/json"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem/idemcode"
)

// Configure puts the edge on srv: p as its error presenter, a recover
// function that makes a resolver's panic an unexpected error (logged by p
// under a correlation id; gqlgen's default prints it and answers without a
// code), the document limits of l (OperationLimits, which run before
// gqlgen parses and validates, and gqlgen's parser token limit), gqlgen's
// complexity limit, a query cache bounded in bytes (DocumentCache, unless
// l.DocumentCacheBytes is negative: it replaces one set before), and a last transport that answers a request no other
// transport serves with BAD_REQUEST. Zero fields of l take their defaults.
//
// Call it after adding transports, and before the extensions that work on
// the operation, so that the limits see the operation first.
func Configure(srv *handler.Server, l Limits, p *Presenter) {
	l = l.withDefaults()
	srv.SetErrorPresenter(p.Present)
	srv.SetRecoverFunc(recoverFunc)
	if l.DocumentCacheBytes > 0 {
		srv.SetQueryCache(NewDocumentCache(l.DocumentCacheBytes, l.MaxCachedDocumentBytes))
	}
	srv.Use(NewOperationLimits(l))
	if l.MaxTokens > 0 {
		srv.SetParserTokenLimit(l.MaxTokens)
	}
	if l.MaxComplexity > 0 {
		srv.Use(extension.FixedComplexityLimit(l.MaxComplexity))
	}
	srv.AddTransport(unsupportedTransport{})
}

// unsupportedTransport is the transport Configure adds last, so that gqlgen
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
