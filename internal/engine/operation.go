package engine

// What a claim keeps so that the recoverer (recover.go) can run its field
// again when the client never comes back: the field alone, as a GraphQL
// request (query and variables) that the server executes like any other.

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"

	"github.com/goovo/idem/internal/directive"
	"github.com/goovo/idem/internal/record"
)

// storedOperation is a GraphQL request of one idempotent field, as the
// record's operation column keeps it, with what the application's
// authentication needs to act as the request's caller again
// (Config.Caller). The recoverer sends the query and variables, as they
// are, and hands Caller to Config.CallerContext.
type storedOperation struct {
	Query     string          `json:"query"`
	Variables json.RawMessage `json:"variables,omitempty"`
	Caller    []byte          `json:"caller,omitempty"`
}

// operationOf returns the request that runs field again, with its key, or
// nil when it is over record.MaxOperationBytes. field is the field as
// GraphQL executes it (executedField: every copy's selection under its
// response name). It keeps its alias, arguments and selection as the
// client wrote them, with the fragments and variables they use, so that
// the run's fingerprint is the claim's. keyInQuery: the request's key
// argument did not carry the key (absent, or null: the key came from the
// Idempotency-Key header), so the key is written into the query as the
// argument's value, whatever the argument said; the fingerprint leaves
// the argument out.
func operationOf(oc *graphql.OperationContext, field *ast.Field, key string, keyInQuery bool, caller []byte) []byte {
	return shapeOf(oc, field, key, keyInQuery).encode(oc.Variables, caller)
}

// operationShape is a stored operation but for its variables' values: the
// query, JSON-encoded, and the names of the variables it uses.
type operationShape struct {
	query []byte
	vars  []string
}

// shapeOf formats the query that runs field again (see operationOf).
func shapeOf(oc *graphql.OperationContext, field *ast.Field, key string, keyInQuery bool) *operationShape {
	f := *field
	if keyInQuery {
		args := make(ast.ArgumentList, 0, len(field.Arguments)+1)
		for _, a := range field.Arguments {
			if a.Name != directive.KeyArgument {
				args = append(args, a)
			}
		}
		f.Arguments = append(args, &ast.Argument{Name: directive.KeyArgument, Value: &ast.Value{Kind: ast.StringValue, Raw: key}})
	}
	// What the query uses, once the key is in place: a null variable it
	// replaced is not declared (an unused variable fails validation).
	u := uses{doc: oc.Doc, vars: map[string]bool{}, fragments: map[string]bool{}}
	u.arguments(f.Arguments)
	u.directives(f.Directives)
	u.selectionSet(f.SelectionSet)

	op := &ast.OperationDefinition{Operation: ast.Mutation, SelectionSet: ast.SelectionSet{&f}}
	shape := &operationShape{}
	for _, d := range oc.Operation.VariableDefinitions {
		if !u.vars[d.Variable] {
			continue
		}
		op.VariableDefinitions = append(op.VariableDefinitions, d)
		shape.vars = append(shape.vars, d.Variable)
	}
	doc := &ast.QueryDocument{Operations: ast.OperationList{op}}
	if oc.Doc != nil {
		for _, fr := range oc.Doc.Fragments {
			if u.fragments[fr.Name] {
				doc.Fragments = append(doc.Fragments, fr)
			}
		}
	}
	var q bytes.Buffer
	formatter.NewFormatter(&q, formatter.WithIndent("")).FormatQueryDocument(doc)
	shape.query, _ = json.Marshal(q.String()) // a string always encodes
	return shape
}

// encode returns the stored operation with the values the request gave
// the shape's variables, and caller: the bytes json.Marshal makes of a
// storedOperation, or nil when they are over record.MaxOperationBytes.
func (s *operationShape) encode(values map[string]any, caller []byte) []byte {
	vars := make(map[string]any, len(s.vars))
	for _, name := range s.vars {
		if v, ok := values[name]; ok {
			vars[name] = v
		}
	}
	b := make([]byte, 0, len(s.query)+32)
	b = append(b, `{"query":`...)
	b = append(b, s.query...)
	if len(vars) > 0 {
		vb, err := json.Marshal(vars)
		if err != nil {
			return nil
		}
		b = append(append(b, `,"variables":`...), vb...)
	}
	if len(caller) > 0 {
		cb, _ := json.Marshal(caller) // bytes always encode (base64)
		b = append(append(b, `,"caller":`...), cb...)
	}
	b = append(b, '}')
	if len(b) > record.MaxOperationBytes {
		return nil
	}
	return b
}

// maxCachedShapes and maxCachedShapeBytes bound operationShapes: past
// either, the cache starts over. Each field is charged the text of the
// document it holds alive (its position points at the source), fields of
// one document each charged the whole text: a bound, not a count. A field
// of a document larger than maxShapeSourceBytes is not cached: gqlgen's
// query cache does not keep such a document (idemhttp.DocumentCache), so
// the same field never comes again, and the cache would only keep a
// client's megabyte after its answer.
const (
	maxCachedShapes     = 1024
	maxCachedShapeBytes = 16 << 20
	maxShapeSourceBytes = 64 << 10
)

// operationShapes caches the shape of each idempotent field of the parsed
// documents that gqlgen's query cache hands out again and again: the same
// *ast.Field for the same query text. Formatting the query is most of the
// cost of a stored operation, and every request pays it, replays included
// (a claim carries it). Not cached: a field whose key is written into the
// query (keyInQuery), and a field selected more than once under its
// response name, whose executed field is made anew by each request (and
// may differ between requests of one document: @include(if: $v) on a
// copy). The map holds its fields, so that no other field can take the
// address of one while it is a key.
type operationShapes struct {
	mu     sync.Mutex
	shapes map[*ast.Field]*operationShape
	bytes  int // the sources' text the fields hold, as charged
}

// sourceBytes is the length of the document text field holds alive.
func sourceBytes(field *ast.Field) int {
	if field.Position == nil || field.Position.Src == nil {
		return 0
	}
	return len(field.Position.Src.Input)
}

// of is operationOf, from the cache when it can: cacheable says that
// field is the document's own (a single copy).
func (c *operationShapes) of(oc *graphql.OperationContext, field *ast.Field, cacheable bool, key string, keyInQuery bool, caller []byte) []byte {
	src := sourceBytes(field)
	if !cacheable || keyInQuery || src > maxShapeSourceBytes {
		return operationOf(oc, field, key, keyInQuery, caller)
	}
	c.mu.Lock()
	shape := c.shapes[field]
	c.mu.Unlock()
	if shape == nil {
		shape = shapeOf(oc, field, key, false)
		c.mu.Lock()
		if c.shapes == nil || len(c.shapes) >= maxCachedShapes || c.bytes+src > maxCachedShapeBytes {
			c.shapes, c.bytes = make(map[*ast.Field]*operationShape), 0
		}
		c.shapes[field] = shape
		c.bytes += src
		c.mu.Unlock()
	}
	return shape.encode(oc.Variables, caller)
}

// executedField is the root field cf as GraphQL executes it under its
// response name: the field itself when the operation selects it once,
// else a copy of its first occurrence whose selection set is every
// copy's, in document order (gqlgen's collection has merged them into
// cf.Selections; validation made their names and arguments the same).
// What a request fingerprints, keeps for the recoverer and replays is
// this field, so that a replay answers all that the request selected.
func executedField(cf graphql.CollectedField) *ast.Field {
	if sameSelections(cf.Selections, cf.Field.SelectionSet) {
		return cf.Field
	}
	f := *cf.Field
	f.SelectionSet = cf.Selections
	return &f
}

// sameSelections reports whether a and b hold the same selections, in
// the same order: a field selected once, collected.
func sameSelections(a, b ast.SelectionSet) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// uses collects the variables and fragments a field uses.
type uses struct {
	doc       *ast.QueryDocument
	vars      map[string]bool
	fragments map[string]bool
}

func (u *uses) selectionSet(ss ast.SelectionSet) {
	for _, s := range ss {
		switch s := s.(type) {
		case *ast.Field:
			u.arguments(s.Arguments)
			u.directives(s.Directives)
			u.selectionSet(s.SelectionSet)
		case *ast.InlineFragment:
			u.directives(s.Directives)
			u.selectionSet(s.SelectionSet)
		case *ast.FragmentSpread:
			u.directives(s.Directives)
			if u.fragments[s.Name] || u.doc == nil {
				continue
			}
			u.fragments[s.Name] = true
			if def := u.doc.Fragments.ForName(s.Name); def != nil {
				u.directives(def.Directives)
				u.selectionSet(def.SelectionSet)
			}
		}
	}
}

func (u *uses) directives(ds ast.DirectiveList) {
	for _, d := range ds {
		u.arguments(d.Arguments)
	}
}

func (u *uses) arguments(args ast.ArgumentList) {
	for _, a := range args {
		u.value(a.Value)
	}
}

func (u *uses) value(v *ast.Value) {
	if v == nil {
		return
	}
	if v.Kind == ast.Variable {
		u.vars[v.Raw] = true
	}
	for _, c := range v.Children {
		u.value(c.Value)
	}
}
