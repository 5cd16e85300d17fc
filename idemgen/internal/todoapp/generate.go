// Package todoapp is an application generated with the framework from a
// schema unlike the example's, after entgql's todo example: UUID ids,
// entgql.MapsTo and entgql.Skip fields, an enum, a JSON field, edges, a
// column type for PostgreSQL only, tenant isolation, and a create mutation
// the application keeps as its own during a key rollout. Its tests check
// what the generator makes of such a schema, end to end.
package todoapp

//go:generate go run github.com/goovo/idem/idemgen/cmd/idemgen
