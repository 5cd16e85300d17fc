package idem

// The example application's generated code: ent (with idemgen and entgql)
// first, then gqlgen (with idemgen's plugin), which reads ent's output.
//go:generate go run ./ent/entc.go
//go:generate go run ./graph/gqlgen.go
