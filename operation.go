package idem

// What a claim keeps so that the recoverer (recover.go) can run its field
// again when the client never comes back: the field alone, as a GraphQL
// request (query and variables) that the server executes like any other.

import (
	"bytes"
	"encoding/json"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"

	"github.com/goovo/idem/internal/record"
)

// storedOperation is a GraphQL request of one idempotent field, as the
// record's operation column keeps it.
type storedOperation struct {
	Query     string         `json:"query"`
	Variables map[string]any `json:"variables,omitempty"`
}

// operationOf returns the request that runs field again, with its key, or
// nil when it is over record.MaxOperationBytes. The field keeps its alias,
// arguments and selection as the client wrote them, with the fragments and
// variables they use, so that the run's fingerprint is the claim's; a key
// sent in the header becomes the key argument, which the fingerprint leaves
// out.
func operationOf(oc *graphql.OperationContext, field *ast.Field, key string) []byte {
	u := uses{doc: oc.Doc, vars: map[string]bool{}, fragments: map[string]bool{}}
	u.arguments(field.Arguments)
	u.directives(field.Directives)
	u.selectionSet(field.SelectionSet)

	f := *field
	if f.Arguments.ForName(KeyArgument) == nil {
		f.Arguments = append(append(ast.ArgumentList{}, field.Arguments...),
			&ast.Argument{Name: KeyArgument, Value: &ast.Value{Kind: ast.StringValue, Raw: key}})
	}
	op := &ast.OperationDefinition{Operation: ast.Mutation, SelectionSet: ast.SelectionSet{&f}}
	vars := map[string]any{}
	for _, d := range oc.Operation.VariableDefinitions {
		if !u.vars[d.Variable] {
			continue
		}
		op.VariableDefinitions = append(op.VariableDefinitions, d)
		if v, ok := oc.Variables[d.Variable]; ok {
			vars[d.Variable] = v
		}
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
	b, err := json.Marshal(storedOperation{Query: q.String(), Variables: vars})
	if err != nil || len(b) > record.MaxOperationBytes {
		return nil
	}
	return b
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
