package idemhttp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/document"
	"github.com/goovo/idem/internal/outcome"
	"github.com/goovo/idem/internal/reqstate"
	"github.com/goovo/idem/internal/store"
)

// Presenter is the server's error presenter, which Configure sets: the one
// place that decides what of an error a client sees.
//
// Errors written for clients reach them as they are: GraphQL errors the
// application or gqlgen created (*gqlerror.Error with no Go error inside,
// or with a message of its own over one), the hook's refusals
// (*idemcode.Error), errors marked idem.Final, errors that carry an
// extensions.code, and the errors of reading an argument (a scalar that
// does not parse). Every other error is unexpected: a database or driver
// error, a provider's error, a panic. gqlgen wraps each in a
// *gqlerror.Error before any presenter sees it (its message is the Go
// error's text), which is how they are told apart. MapError may turn such
// an error into one for clients; otherwise the client gets a generic
// message, the code INTERNAL_SERVER_ERROR (retryable) and
// extensions.correlationId; Logger gets the cause under that id.
//
// ent's not-found and constraint errors (idembackend.ClientError, which the
// generated ent package implements) are answered NOT_FOUND ("book not
// found") and BAD_USER_INPUT, with a message of the library's, never the
// error's text (a constraint error quotes the database), unless MapError
// maps them or they are marked Retryable; the hook makes them final.
//
// An error without a code gets one: MUTATION_FAILED when it is marked
// Final, INTERNAL_SERVER_ERROR (retryable: unmarked errors are) inside a
// field, BAD_REQUEST for the request as a whole (a body gqlgen could not
// decode: its message, which quotes the whole body, is cut to the decoder's
// complaint; a batch, a JSON array, is said to be one); BAD_USER_INPUT for
// an argument (its message cut to 200 bytes: an argument's parser quotes
// the value, which may be a megabyte), and, with a message of its own, for
// the database's refusal of text it cannot store (a NUL character on
// PostgreSQL), which is final unless marked Retryable. What remains goes
// through Next. The presenter is idempotent: a replayed error, presented
// when it was stored, is presented again unchanged.
type Presenter struct {
	// Logger receives the causes of unexpected errors, under their
	// correlation ids. Default slog.Default().
	Logger *slog.Logger
	// MapError, if set, is asked about every unexpected error before it is
	// replaced with INTERNAL_SERVER_ERROR (idem.Config.MapError).
	MapError func(ctx context.Context, err error) *gqlerror.Error
	// Next presents the errors that reach clients as they are
	// (idem.Config.ErrorPresenter). Default graphql.DefaultErrorPresenter.
	Next graphql.ErrorPresenterFunc
}

// recoverFunc is the server's recover function, which Configure sets: a
// resolver's panic becomes an unexpected error, so that the presenter logs
// the panic and its stack under a correlation id and the client gets
// INTERNAL_SERVER_ERROR (gqlgen's default prints to stderr and answers
// "internal system error" without a code).
func recoverFunc(ctx context.Context, p any) error {
	return &panicError{value: p, stack: debug.Stack()}
}

type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v\n%s", p.value, p.stack) }

func (p *Presenter) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.Default()
	}
	return p.Logger
}

func (p *Presenter) next(ctx context.Context, err error) *gqlerror.Error {
	if p.Next == nil {
		return graphql.DefaultErrorPresenter(ctx, err)
	}
	return p.Next(ctx, err)
}

// Present implements graphql.ErrorPresenterFunc.
func (p *Presenter) Present(ctx context.Context, err error) *gqlerror.Error {
	if err == nil {
		return nil
	}
	var g *gqlerror.Error
	if !errors.As(err, &g) {
		g = gqlerror.WrapPath(graphql.GetPath(ctx), err)
	}
	var code idemcode.Code
	var ce idembackend.ClientError
	switch {
	case !hasCode(g) && errors.As(err, &ce) && !outcome.IsRetryable(err) && (g.Err == nil || g.Message == g.Err.Error()):
		// ent's not-found or constraint error, final, unless MapError
		// says otherwise; its text may quote the database.
		if m := p.mapped(ctx, g); m != nil {
			return p.Present(ctx, m)
		}
		return p.next(ctx, p.clientError(ctx, g, ce))
	case hasCode(g) && isVariableTypeError(g):
		return p.next(ctx, variableTypeError(g))
	case hasCode(g) || outcome.IsFinal(err) || isHookError(err):
	case g.Err == nil:
		// Written as a GraphQL error: by the application, by gqlgen (a
		// parse or validation error), or replayed from a record.
	case store.Unstorable(g.Err) && !outcome.IsRetryable(err):
		// Text the database cannot store, which a resolver wrote: the
		// input's fault, final (the engine's finalError), not an outage.
		return p.next(ctx, p.unstorable(ctx, g))
	case g.Message != g.Err.Error():
		// A message written for the client over a cause.
	case isArgumentError(ctx, g):
		code = idemcode.BadUserInput
	default:
		if m := p.mapped(ctx, g); m != nil {
			return p.Present(ctx, m)
		}
		return p.next(ctx, p.unexpected(ctx, g))
	}
	out := p.next(ctx, err)
	if out == nil || hasCode(out) {
		return out
	}
	if code == "" {
		switch {
		case outcome.IsFinal(err):
			code = idemcode.MutationFailed
		case graphql.GetFieldContext(ctx) == nil:
			code = idemcode.BadRequest
		default:
			code = idemcode.InternalServerError
		}
	}
	// A copy: the application may return one *gqlerror.Error value from
	// many places.
	cp := *out
	cp.Extensions = maps.Clone(out.Extensions)
	if cp.Extensions == nil {
		cp.Extensions = map[string]any{}
	}
	cp.Extensions["code"] = string(code)
	switch code {
	case idemcode.BadRequest:
		cp.Message = requestErrorMessage(cp.Message)
	case idemcode.BadUserInput:
		// An argument's parser quotes the value (strconv's, a megabyte
		// string for an ID).
		cp.Message = clip(cp.Message)
	}
	return &cp
}

// mapped returns what MapError makes of the unexpected error g, as
// an error written for the client, or nil. The copy carries no cause, so
// that presenting it is presenting an error written for clients, never
// this path again.
func (p *Presenter) mapped(ctx context.Context, g *gqlerror.Error) *gqlerror.Error {
	if p.MapError == nil {
		return nil
	}
	m := p.MapError(ctx, g.Err)
	if m == nil {
		return nil
	}
	cp := *m
	cp.Err = nil
	if cp.Path == nil {
		cp.Path = g.Path
	}
	if cp.Locations == nil {
		cp.Locations = g.Locations
	}
	return &cp
}

// clientError answers ent's not-found or constraint error g, whose cause
// goes to the log at level Info (it is no outage), with the code and
// message of ce.
func (p *Presenter) clientError(ctx context.Context, g *gqlerror.Error, ce idembackend.ClientError) *gqlerror.Error {
	code, msg := ce.IdempotencyClientError()
	p.logger().LogAttrs(ctx, slog.LevelInfo, "ent's error answered "+code,
		slog.String("path", g.Path.String()), slog.Any("error", g.Err))
	return &gqlerror.Error{
		Message:    msg,
		Path:       g.Path,
		Locations:  g.Locations,
		Extensions: map[string]any{"code": code},
	}
}

// unexpected logs the cause of g under a new correlation id and returns
// what the client sees instead.
func (p *Presenter) unexpected(ctx context.Context, g *gqlerror.Error) *gqlerror.Error {
	id := correlationID()
	level := slog.LevelError
	if errors.Is(g.Err, context.Canceled) {
		level = slog.LevelInfo // the client went away
	}
	msg := "unexpected error; the client got INTERNAL_SERVER_ERROR"
	if reqstate.Recoverer(ctx) {
		// No client waits: the recoverer runs the claim again later.
		msg = "the recoverer's run of an abandoned claim failed with an unexpected error; it runs the claim again later"
	}
	p.logger().LogAttrs(ctx, level, msg,
		slog.String("correlation_id", id),
		slog.String("path", g.Path.String()),
		slog.Any("error", g.Err))
	return &gqlerror.Error{
		Message:   "internal server error (correlation id " + id + ")",
		Path:      g.Path,
		Locations: g.Locations,
		Extensions: map[string]any{
			"code":          string(idemcode.InternalServerError),
			"correlationId": id,
		},
	}
}

func hasCode(g *gqlerror.Error) bool {
	c, ok := g.Extensions["code"].(string)
	return ok && c != ""
}

func isHookError(err error) bool {
	var ie *idemcode.Error
	return errors.As(err, &ie)
}

// isArgumentError reports an error of reading a field's arguments: gqlgen
// reports it, before the resolver runs, at the argument's path under the
// field's.
func isArgumentError(ctx context.Context, g *gqlerror.Error) bool {
	fc := graphql.GetFieldContext(ctx)
	return fc != nil && fc.Args == nil && len(g.Path) > len(fc.Path())
}

// correlationID is 16 hex digits from crypto/rand.
func correlationID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requestErrorMessage is what a client reads of an error about its request
// as a whole. gqlgen's POST transport quotes the whole body after the
// decoder's complaint: a client that sent a megabyte would get it back.
// gqlgen does not take batches (a JSON array of operations), and says so
// only as a decoding error.
func requestErrorMessage(msg string) string {
	const undecodable = "json request body could not be decoded: "
	rest, ok := strings.CutPrefix(msg, undecodable)
	if !ok {
		return msg
	}
	if strings.Contains(rest, "cannot unmarshal array into Go value of type") {
		return "the request body is a JSON array, a batch of operations, which this endpoint does not take: send each operation in a request of its own"
	}
	if i := strings.Index(rest, " body:"); i >= 0 {
		rest = rest[:i]
	}
	return "the request body is not a GraphQL request in JSON: " + clip(rest)
}

// clip cuts a message that quotes what the client sent to 200 bytes.
func clip(msg string) string {
	const most = 200
	if len(msg) <= most {
		return msg
	}
	return strings.ToValidUTF8(msg[:most], "") + "…"
}

// unstorable answers an error whose cause is the database's refusal of
// text it cannot store (a resolver's write of text it made itself):
// BAD_USER_INPUT, final, without the database's words, which the log gets
// at level Info (it is no outage).
func (p *Presenter) unstorable(ctx context.Context, g *gqlerror.Error) *gqlerror.Error {
	p.logger().LogAttrs(ctx, slog.LevelInfo, "the database refused text it cannot store; the client got BAD_USER_INPUT",
		slog.String("path", g.Path.String()), slog.Any("error", g.Err))
	return &gqlerror.Error{
		Message:    "the input holds " + document.UnstorableMessage,
		Path:       g.Path,
		Locations:  g.Locations,
		Extensions: map[string]any{"code": string(idemcode.BadUserInput)},
	}
}

// isVariableTypeError reports gqlparser's refusal of a variable's value
// ("cannot use value 0 as Int" for 1e400, "cannot use float64 as ID"):
// Go's names and a value the client did not send.
func isVariableTypeError(g *gqlerror.Error) bool {
	return g.Extensions["code"] == string(idemcode.ValidationFailed) && len(g.Path) >= 2 &&
		g.Path[0] == ast.PathName("variable") && strings.HasPrefix(g.Message, "cannot use ")
}

// variableTypeError words a variable's refused value for the client: the
// type it should be, from the end of gqlparser's message.
func variableTypeError(g *gqlerror.Error) *gqlerror.Error {
	want := g.Message[strings.Index(g.Message, " as ")+len(" as "):]
	if i := strings.IndexByte(want, ':'); i >= 0 {
		want = want[:i] // "ID: integers beyond 2^53-1 may have been rounded; …"
	}
	msg := fmt.Sprintf("the value of variable $%s is not a valid %s", g.Path[1], want)
	if want == "Int" {
		msg += ": an Int is a whole number from -2147483648 to 2147483647 (GraphQL's Int is 32-bit)"
	}
	cp := *g
	cp.Message = msg
	cp.Extensions = maps.Clone(g.Extensions)
	return &cp
}
