package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Default values of Limits.
const (
	DefaultMaxBodyBytes  = 1 << 20
	DefaultMaxFields     = 1000
	DefaultMaxAliases    = 100
	DefaultMaxDepth      = 12
	DefaultMaxComplexity = 1000
)

// Limits bound what one request may ask of the server, so that one tenant
// cannot hold another up: a request over a limit is refused before any
// resolver or database work. Install applies them all by default. A zero
// field takes its default; a negative one turns that limit off.
//
// Without them a 100 MB body is read whole into memory, and an operation
// that selects one field under 45,000 aliases takes seconds of CPU (gqlgen
// collects fields in time quadratic in the aliases) while, on SQLite, its
// mutation holds the database's write lock.
type Limits struct {
	// MaxBodyBytes bounds the request body. A body declared larger
	// (Content-Length) is refused without being read, one that turns out
	// larger while it is read is refused when it reaches the limit: HTTP
	// 413 with a GraphQL error of code REQUEST_BODY_TOO_LARGE. It needs the
	// handler Install returns (or Extension.Middleware). Default 1 MiB.
	MaxBodyBytes int64

	// MaxFields bounds the fields an operation selects, counted with every
	// fragment spread expanded where it is spread. Default 1000.
	MaxFields int

	// MaxAliases bounds the aliased fields of an operation (expanded like
	// MaxFields). Default 100.
	MaxAliases int

	// MaxDepth bounds how deep an operation's selections nest; a root field
	// is at depth 1. Introspection (__schema, __type) is bounded by
	// gqlparser's own rule and not counted. Default 12.
	MaxDepth int

	// MaxComplexity is gqlgen's complexity limit
	// (extension.FixedComplexityLimit): by default each field costs 1 plus
	// its children, and the schema's complexity functions count where they
	// are set. It is checked after the limits above, which keep gqlgen's
	// calculation (exponential in nested fragment spreads) cheap. Refused
	// with COMPLEXITY_LIMIT_EXCEEDED. Default 1000.
	MaxComplexity int
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxFields, DefaultMaxFields)
	def(&l.MaxAliases, DefaultMaxAliases)
	def(&l.MaxDepth, DefaultMaxDepth)
	def(&l.MaxComplexity, DefaultMaxComplexity)
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return l
}

// maxSelectionFields bounds an idempotent mutation's selection, fragments
// expanded, whatever Limits say: the fingerprint prints it expanded, so that
// a fragment spread twice in each of 40 nested fragments, a short document
// that Limits.MaxFields refuses, would otherwise be printed 2^40 times
// (IDEMPOTENCY_REQUEST_TOO_LARGE).
const maxSelectionFields = 10_000

// limitedBody reads the request body through http.MaxBytesReader and
// notes when the limit was reached, so that the response can be a 413
// whatever gqlgen makes of the read error.
type limitedBody struct {
	io.ReadCloser
	st *httpState
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		b.st.bodyTooLong.Store(true)
	}
	return n, err
}

// writeBodyTooLarge answers 413 with a GraphQL error.
func writeBodyTooLarge(w http.ResponseWriter, limit int64) {
	body, _ := json.Marshal(&graphql.Response{Errors: gqlerror.List{{
		Message:    fmt.Sprintf("the request body is larger than %d bytes, the limit", limit),
		Extensions: map[string]any{"code": string(CodeBodyTooLarge)},
	}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	_, _ = w.Write(body)
}

// OperationLimits is the handler extension that refuses an operation over
// Limits.MaxFields, MaxAliases or MaxDepth before anything runs (code
// OPERATION_LIMIT_EXCEEDED). It counts on the parsed document, in one pass
// that visits each fragment once, before gqlgen collects fields (quadratic
// in aliases) or computes complexity (exponential in nested fragment
// spreads), so it must be added before them: Install adds it first among
// its extensions. A limit of 0 or less is off.
type OperationLimits struct {
	MaxFields, MaxAliases, MaxDepth int
}

var (
	_ graphql.HandlerExtension        = OperationLimits{}
	_ graphql.OperationContextMutator = OperationLimits{}
)

// ExtensionName implements graphql.HandlerExtension.
func (OperationLimits) ExtensionName() string { return "OperationLimits" }

// Validate implements graphql.HandlerExtension.
func (OperationLimits) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext implements graphql.OperationContextMutator.
func (l OperationLimits) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	m := measure(oc.Operation.SelectionSet)
	refuse := func(format string, args ...any) *gqlerror.Error {
		return &gqlerror.Error{
			Message:    fmt.Sprintf(format, args...),
			Extensions: map[string]any{"code": string(CodeOperationLimit)},
		}
	}
	switch {
	case l.MaxFields > 0 && m.fields > l.MaxFields:
		return refuse("the operation selects %s fields (fragments expanded); the limit is %d", count(m.fields), l.MaxFields)
	case l.MaxAliases > 0 && m.aliases > l.MaxAliases:
		return refuse("the operation has %s aliased fields (fragments expanded); the limit is %d", count(m.aliases), l.MaxAliases)
	case l.MaxDepth > 0 && m.depth > l.MaxDepth:
		return refuse("the operation's selections nest %d deep; the limit is %d", m.depth, l.MaxDepth)
	}
	return nil
}

// size is what an operation (or a part of it) selects.
type size struct{ fields, aliases, depth int }

// measure sizes a selection set, expanding each fragment where it is
// spread, by reusing the size of each fragment definition: linear in the
// document, where walking every spread would be exponential. Validation
// has rejected fragment cycles and set each spread's Definition.
func measure(set ast.SelectionSet) size {
	memo := map[*ast.FragmentDefinition]size{}
	var walk func(ast.SelectionSet) size
	walk = func(set ast.SelectionSet) size {
		var s size
		add := func(c size) {
			s.fields = saturatingAdd(s.fields, c.fields)
			s.aliases = saturatingAdd(s.aliases, c.aliases)
			s.depth = max(s.depth, c.depth)
		}
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				c := walk(sel.SelectionSet)
				c.fields = saturatingAdd(c.fields, 1)
				if sel.Alias != "" && sel.Alias != sel.Name {
					c.aliases = saturatingAdd(c.aliases, 1)
				}
				if sel.Name == "__schema" || sel.Name == "__type" {
					c.depth = 0 // bounded by gqlparser's MaxIntrospectionDepth
				}
				c.depth++
				add(c)
			case *ast.InlineFragment:
				add(walk(sel.SelectionSet))
			case *ast.FragmentSpread:
				if sel.Definition == nil {
					continue
				}
				c, ok := memo[sel.Definition]
				if !ok {
					c = walk(sel.Definition.SelectionSet)
					memo[sel.Definition] = c
				}
				add(c)
			}
		}
		return s
	}
	return walk(set)
}

func saturatingAdd(a, b int) int {
	if a > math.MaxInt32-b {
		return math.MaxInt32
	}
	return a + b
}

// count prints a saturated count as "more than 2147483646".
func count(n int) string {
	if n >= math.MaxInt32 {
		return fmt.Sprintf("more than %d", math.MaxInt32-1)
	}
	return fmt.Sprint(n)
}
