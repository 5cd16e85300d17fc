package idem_test

import (
	"context"
	"fmt"

	"github.com/goovo/idem"
)

// Code outside a GraphQL request (a job, a test) names the tenant whose
// rows the ent queries of isolated entities may see; the hook does it for
// every GraphQL operation.
func ExampleWithTenant() {
	ctx := idem.WithTenant(context.Background(), "acme")
	tenant, ok := idem.TenantFromContext(ctx)
	fmt.Println(tenant, ok)
	// Output: acme true
}
