// Package graph is the GraphQL layer of the app that internal/readmepath
// builds; this file is the app's own, from before it added idem, as
// entgql's tutorial writes it.
package graph

import (
	"example.com/app/ent"

	"github.com/99designs/gqlgen/graphql"
)

// Resolver is the resolver root.
type Resolver struct{ client *ent.Client }

// NewSchema creates a graphql executable schema.
func NewSchema(client *ent.Client) graphql.ExecutableSchema {
	return NewExecutableSchema(Config{
		Resolvers: &Resolver{client},
	})
}
