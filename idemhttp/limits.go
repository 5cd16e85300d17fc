package idemhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/document"
)

// Default values of Limits.
const (
	DefaultMaxBodyBytes  = 1 << 20
	DefaultMaxTokens     = 15_000
	DefaultMaxFields     = 1000
	DefaultMaxAliases    = 100
	DefaultMaxDepth      = 12
	DefaultMaxFieldPairs = 10_000
	DefaultMaxNodes      = 20_000
	DefaultMaxComplexity = 1000
)

// Limits bound what one request may ask of the server, so that one tenant
// cannot hold another up: a request over a limit is refused before any
// resolver or database work, and a document over a limit before gqlgen
// validates it. idem.Hook.Handler applies them all by default. A zero field takes its
// default; a negative one turns that limit off.
//
// Without them a 100 MB body is read whole into memory; an operation that
// selects one field under 45,000 aliases takes seconds of CPU (gqlgen
// collects fields in time quadratic in the aliases) while, on SQLite, its
// mutation holds the database's write lock; and gqlparser's validation,
// which runs before any handler extension sees the operation, takes 11 s
// and 580 MB for a chain of 4,000 fragments (158 KB), 35 s for the field id
// selected 20,000 times (60 KB). docs/limits.md has what the worst request
// under each default costs.
type Limits struct {
	// MaxBodyBytes bounds the request body. A body declared larger
	// (Content-Length) is refused without being read, one that turns out
	// larger while it is read is refused when it reaches the limit: HTTP
	// 413 with a GraphQL error of code REQUEST_BODY_TOO_LARGE. It needs the
	// handler idem.Hook.Handler returns (Middleware). Default 1 MiB.
	MaxBodyBytes int64

	// MaxTokens bounds the lexical tokens of the document (names,
	// punctuation, values, comments): the parser stops at the limit.
	// Default 15,000.
	MaxTokens int

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

	// MaxFieldPairs bounds the pairs of fields that share a response name
	// in one selection set, fragments expanded and the selections of
	// fields that share a name merged (as GraphQL merges them into one
	// answer), summed over the document: validation
	// (OverlappingFieldsCanBeMerged) compares every such pair, so that n
	// fields under one name cost n(n-1)/2. A pair of fields with arguments
	// counts 1 plus the product of their argument nodes, since their
	// arguments are compared pairwise too. Default 10,000 (the field id
	// selected 141 times in one place).
	MaxFieldPairs int

	// MaxNodes bounds the nodes of the document (fields, fragment spreads,
	// inline fragments, arguments, values, directives, variable
	// definitions), each operation and each fragment definition counted
	// with the fragments it spreads expanded where they are spread: what
	// validation walks, since it walks a fragment again for every
	// definition that reaches it. Default 20,000.
	MaxNodes int

	// MaxComplexity is gqlgen's complexity limit
	// (extension.FixedComplexityLimit): by default each field costs 1 plus
	// its children, and the schema's complexity functions count where they
	// are set. It is checked after validation, by when the limits above
	// keep gqlgen's calculation (exponential in nested fragment spreads)
	// cheap. Refused with COMPLEXITY_LIMIT_EXCEEDED. Default 1000.
	MaxComplexity int

	// DocumentCacheBytes bounds the memory of the parsed documents
	// Configure keeps for the next request that sends the same text
	// (gqlgen's query cache, a DocumentCache): what a client can make the
	// server keep after its answer. Default 16 MiB. Negative: Configure
	// leaves the server's query cache as it is (gqlgen's default keeps
	// none).
	DocumentCacheBytes int64

	// MaxCachedDocumentBytes is the largest document text the cache
	// keeps; a larger one is parsed again each time. Default 64 KiB.
	MaxCachedDocumentBytes int64
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.MaxTokens, DefaultMaxTokens)
	def(&l.MaxFields, DefaultMaxFields)
	def(&l.MaxAliases, DefaultMaxAliases)
	def(&l.MaxDepth, DefaultMaxDepth)
	def(&l.MaxFieldPairs, DefaultMaxFieldPairs)
	def(&l.MaxNodes, DefaultMaxNodes)
	def(&l.MaxComplexity, DefaultMaxComplexity)
	def64 := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def64(&l.MaxBodyBytes, DefaultMaxBodyBytes)
	def64(&l.DocumentCacheBytes, DefaultDocumentCacheBytes)
	def64(&l.MaxCachedDocumentBytes, DefaultMaxCachedDocumentBytes)
	return l
}

// writeBodyTooLarge answers 413 with a GraphQL error.
func writeBodyTooLarge(w http.ResponseWriter, limit int64) {
	body, _ := json.Marshal(&graphql.Response{Errors: gqlerror.List{{
		Message:    fmt.Sprintf("the request body is larger than %d bytes, the limit", limit),
		Extensions: map[string]any{"code": string(idemcode.BodyTooLarge)},
	}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	_, _ = w.Write(body)
}

// OperationLimits is the handler extension that refuses a document over
// Limits.MaxTokens, MaxFields, MaxAliases, MaxDepth, MaxNodes or
// MaxFieldPairs (code OPERATION_LIMIT_EXCEEDED) before gqlgen parses and
// validates it: gqlgen runs its graphql.OperationParameterMutator before
// both, where gqlparser's validation walks every fragment again for each
// definition that reaches it and compares every pair of fields that share
// a response name. It parses the document itself, with the token limit, and
// measures every operation and fragment definition of it in time linear in
// the document (each fragment measured once), then the merged selection
// sets in time bounded by MaxNodes. What it measures is what validation
// will do, so a document within the limits is cheap to validate.
//
// A document it let through is remembered (a hash of its text, in a
// bounded cache), so that the same text, sent again with other variables,
// costs a hash and a lookup. The hash is maphash's, 64 bits with a seed
// drawn for each process, which a client never sees: it cannot make a
// document of its own collide with one that was let through. A document with a fragment cycle is refused
// as validation would refuse it (GRAPHQL_VALIDATION_FAILED), since only an
// acyclic one can be measured by expanding its fragments. One that does
// not parse is left to gqlgen, whose parser stops at the same place.
//
// Configure adds it first among the extensions and sets gqlgen's parser
// token limit to MaxTokens. An extension that rewrites the query
// (extension.AutomaticPersistedQuery) must be added before it.
type OperationLimits struct {
	limits Limits
	seed   maphash.Seed
	seen   *lru.Cache[uint64, struct{}]
}

// operationLimitsCacheSize is how many distinct documents OperationLimits
// remembers it let through: some 100 bytes each.
const operationLimitsCacheSize = 4096

// NewOperationLimits returns the extension for l (zero fields take their
// defaults, negative ones are off; MaxBodyBytes and MaxComplexity are not
// its).
func NewOperationLimits(l Limits) *OperationLimits {
	seen, err := lru.New[uint64, struct{}](operationLimitsCacheSize)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &OperationLimits{limits: l.withDefaults(), seed: maphash.MakeSeed(), seen: seen}
}

var (
	_ graphql.HandlerExtension          = (*OperationLimits)(nil)
	_ graphql.OperationParameterMutator = (*OperationLimits)(nil)
)

// ExtensionName implements graphql.HandlerExtension.
func (*OperationLimits) ExtensionName() string { return "OperationLimits" }

// Validate implements graphql.HandlerExtension.
func (*OperationLimits) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationParameters implements graphql.OperationParameterMutator.
func (o *OperationLimits) MutateOperationParameters(_ context.Context, p *graphql.RawParams) *gqlerror.Error {
	if p.Query == "" {
		return nil // gqlgen answers that there is no operation
	}
	h := maphash.String(o.seed, p.Query)
	if _, ok := o.seen.Get(h); ok {
		return nil
	}
	if err := o.check(p.Query); err != nil {
		return err
	}
	o.seen.Add(h, struct{}{})
	return nil
}

// check parses query with the token limit and measures it.
func (o *OperationLimits) check(query string) *gqlerror.Error {
	l := o.limits
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, max(l.MaxTokens, 0))
	if err != nil {
		var g *gqlerror.Error
		if errors.As(err, &g) && strings.HasPrefix(g.Message, "exceeded token limit") {
			return limitError("the document has more than %d tokens, the limit", l.MaxTokens)
		}
		return nil // gqlgen reports the syntax error
	}
	m := document.NewSizer(doc)
	sets := make([]ast.SelectionSet, 0, len(doc.Operations)+len(doc.Fragments))
	nodes := 0
	for _, op := range doc.Operations {
		s, err := m.Operation(op)
		if err != nil {
			return err
		}
		if err := l.operationError(op, s); err != nil {
			return err
		}
		sets = append(sets, op.SelectionSet)
		nodes = document.SaturatingAdd(nodes, s.Nodes)
	}
	// Validation walks each fragment definition on its own too.
	for _, f := range doc.Fragments {
		s, err := m.Fragment(f)
		if err != nil {
			return err
		}
		sets = append(sets, f.SelectionSet)
		nodes = document.SaturatingAdd(nodes, s.Nodes)
	}
	if l.MaxNodes > 0 && nodes > l.MaxNodes {
		return limitError("the document has %s nodes, each fragment counted where it is spread; the limit is %d", document.Count(nodes), l.MaxNodes)
	}
	// Merging visits every node of every definition once: what MaxNodes
	// bounds. With MaxNodes off it is only done where that stays cheap.
	if l.MaxFieldPairs > 0 && nodes <= max(l.MaxNodes, maxMergeNodes) {
		var c document.Pairs
		for _, set := range sets {
			m.FieldPairs([]ast.SelectionSet{set}, &c)
		}
		if c.Pairs > int64(l.MaxFieldPairs) {
			return limitError("the document has %s pairs of fields that share a response name in one selection set (fragments expanded), which validation compares one by one; the limit is %d (the most: %q, %d times)",
				document.Count(int(c.Pairs)), l.MaxFieldPairs, c.Name, c.Most)
		}
	}
	return nil
}

// operationError refuses an operation over MaxFields, MaxAliases or
// MaxDepth: what it would execute. (A fragment's size counts where it is
// spread; one spread nowhere is a validation error.)
func (l Limits) operationError(op *ast.OperationDefinition, s document.Size) *gqlerror.Error {
	name := "the operation"
	if op.Name != "" {
		name = "operation " + op.Name
	}
	switch {
	case l.MaxFields > 0 && s.Fields > l.MaxFields:
		return limitError("%s selects %s fields (fragments expanded); the limit is %d", name, document.Count(s.Fields), l.MaxFields)
	case l.MaxAliases > 0 && s.Aliases > l.MaxAliases:
		return limitError("%s has %s aliased fields (fragments expanded); the limit is %d", name, document.Count(s.Aliases), l.MaxAliases)
	case l.MaxDepth > 0 && s.Depth > l.MaxDepth:
		return limitError("%s nests %d deep; the limit is %d", name, s.Depth, l.MaxDepth)
	}
	return nil
}

// maxMergeNodes bounds the merging of selection sets (for
// Limits.MaxFieldPairs) when Limits.MaxNodes is off.
const maxMergeNodes = 1 << 20

func limitError(format string, args ...any) *gqlerror.Error {
	return &gqlerror.Error{
		Message:    fmt.Sprintf(format, args...),
		Extensions: map[string]any{"code": string(idemcode.OperationLimitExceeded)},
	}
}
