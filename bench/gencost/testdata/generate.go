package todo

// The plain variant generates with entgql and gqlgen alone (plaingen.go);
// bench/gencost/run makes the library's variant generate with the
// library's program instead, in one process as well.
//go:generate go run ./plaingen.go
//IDEM //go:generate go run github.com/goovo/idem/idemgen/cmd/idemgen -relay=false
