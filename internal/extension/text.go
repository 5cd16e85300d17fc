package extension

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem/internal/document"
	"github.com/goovo/idem/internal/reqstate"
)

// Text refuses an operation, queries included, whose text the database
// cannot store: a NUL character or bytes that are not UTF-8, in a
// variable, a literal argument or the JSON body (BAD_USER_INPUT; see
// internal/document). Every backend refuses alike, before anything runs,
// so that a request is answered the same on PostgreSQL, which refuses a
// NUL, and on SQLite, which would store it.
type Text struct{}

var (
	_ graphql.HandlerExtension        = Text{}
	_ graphql.OperationContextMutator = Text{}
)

// ExtensionName implements graphql.HandlerExtension.
func (Text) ExtensionName() string { return "UnstorableText" }

// Validate implements graphql.HandlerExtension: any schema will do.
func (Text) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext implements graphql.OperationContextMutator. The
// body's check reads what idemhttp.Middleware saw of it (reqstate).
func (Text) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if st := reqstate.From(ctx); st != nil && st.Body != nil && st.Body.Invalid() {
		return document.BodyNotUTF8()
	}
	return document.Arguments(oc)
}
