package extension

import (
	"context"
	"fmt"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// ErrorLimit bounds the errors of an answer without data: a document that
// breaks a validation rule thousands of times (each repeated directive,
// each unused variable is an error) is answered with the first Max of
// them and one more error that says how many more there were, with the
// code of the last one shown, as graphql-js stops at 100. An answer with
// data keeps every error: each belongs to a field that was asked for.
type ErrorLimit struct {
	// Max is how many errors an answer without data shows.
	Max int
}

var (
	_ graphql.HandlerExtension    = ErrorLimit{}
	_ graphql.ResponseInterceptor = ErrorLimit{}
)

// ExtensionName implements graphql.HandlerExtension.
func (ErrorLimit) ExtensionName() string { return "ErrorLimit" }

// Validate implements graphql.HandlerExtension.
func (l ErrorLimit) Validate(graphql.ExecutableSchema) error {
	if l.Max < 1 {
		return fmt.Errorf("extension.ErrorLimit: Max is %d, must be at least 1", l.Max)
	}
	return nil
}

// InterceptResponse implements graphql.ResponseInterceptor.
func (l ErrorLimit) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if resp != nil && len(resp.Data) == 0 && len(resp.Errors) > l.Max {
		more := len(resp.Errors) - l.Max
		last := resp.Errors[l.Max-1]
		resp.Errors = append(resp.Errors[:l.Max:l.Max], &gqlerror.Error{
			Message:    fmt.Sprintf("%d more errors not shown", more),
			Extensions: map[string]any{"code": last.Extensions["code"]},
		})
	}
	return resp
}
