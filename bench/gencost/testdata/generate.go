package todo

//go:generate go run ./ent/entc.go
//go:generate go run ./graph/gqlgen.go
