// Package graph is the GraphQL layer of the example application: orders and
// payments, every mutation of which is retry-safe through the idem hook.
package graph

import (
	"github.com/goovo/idem/ent"
	"github.com/goovo/idem/internal/example/mailer"
	"github.com/goovo/idem/internal/example/provider"
)

// Resolver is the root resolver. It holds the non-transactional client;
// inside an idempotent mutation, ent.FromContext(ctx) is the mutation's
// transaction, and resolvers write through it.
type Resolver struct {
	client   *ent.Client
	provider provider.Provider
	mailer   *mailer.Simulated
	effects  effects // how the receipts are recorded: River's outbox, or the receipt table
}
