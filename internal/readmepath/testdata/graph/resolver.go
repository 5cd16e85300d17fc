// Package graph is the GraphQL layer of the app that internal/readmepath
// builds; this file is the app's own, from before it added idem.
package graph

import "example.com/app/ent"

// Resolver is the root resolver.
type Resolver struct{ client *ent.Client }

// NewResolver returns the root resolver over client.
func NewResolver(client *ent.Client) *Resolver { return &Resolver{client: client} }
