package idemgen_test

import (
	"fmt"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/goovo/idem/idemgen"
)

// CheckSchema is what the gqlgen plugin runs on the schema: a hand-written
// mutation that opts in with @idempotent must take the key argument.
func ExampleCheckSchema() {
	schema := gqlparser.MustLoadSchema(&ast.Source{Input: `
		directive @idempotent(record: String) on FIELD_DEFINITION
		type Query { ok: Boolean }
		type Mutation {
			refund(idempotencyKey: String!, paymentID: ID!, amount: Int!): Boolean @idempotent
			approve(orderID: ID!): Boolean @idempotent
		}`})
	fmt.Println(idemgen.CheckSchema(schema))
	// Output: Mutation.approve is @idempotent and needs the argument idempotencyKey: String! (or String with the Idempotency-Key header, or keyRequired: false)
}
