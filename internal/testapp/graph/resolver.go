// Package graph is the GraphQL layer of the test application.
package graph

import "github.com/goovo/idem/internal/testapp/ent"

// Resolver is the root resolver.
type Resolver struct {
	Client *ent.Client
}
