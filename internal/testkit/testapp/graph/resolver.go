// Package graph is the GraphQL layer of the test application.
package graph

import (
	"context"

	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// Resolver is the root resolver.
type Resolver struct {
	Client *ent.Client
	// Hook, when set, runs inside createShipment after the claim and before
	// the resolver's write (and in createShipmentLease and
	// createShipmentAtomic, whose claim is their only write, after it):
	// tests use it to block, fail or panic.
	Hook func(ctx context.Context, s *ent.Shipment) error
}
