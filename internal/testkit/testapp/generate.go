// Package testapp is a second, unrelated application generated with the
// framework, for tests of the generator's generality.
package testapp

//go:generate go run github.com/goovo/idem/idemgen/cmd/idemgen -relay=false
