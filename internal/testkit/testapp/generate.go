// Package testapp is a second, unrelated application generated with the
// framework, for tests of the generator's generality.
package testapp

//go:generate go run ./ent/entc.go
//go:generate go run ./gqlgen.go
