package graph

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/goovo/idem/idemgen/internal/todoapp/ent"
	"github.com/goovo/idem/idemgen/internal/todoapp/ent/category"
	"github.com/goovo/idem/idemgen/internal/todoapp/ent/todo"
)

// Resolver is the root resolver of the todo application.
type Resolver struct {
	client *ent.Client
}

// errNotFound answers node(id) for an id that is not the caller's. The
// same for an id of another tenant and for one that does not exist.
var errNotFound = errors.New("not found")

// nodeType finds the table of a UUID: UUIDs do not say which entity they
// belong to. The queries are the caller's tenant's, like every query of an
// isolated entity.
func (r *Resolver) nodeType(ctx context.Context, id uuid.UUID) (string, error) {
	if ok, err := r.client.Todo.Query().Where(todo.ID(id)).Exist(ctx); err != nil || ok {
		return todo.Table, err
	}
	if ok, err := r.client.Category.Query().Where(category.ID(id)).Exist(ctx); err != nil || ok {
		return category.Table, err
	}
	return "", errNotFound
}

// NewResolver returns the resolver of client's data.
func NewResolver(client *ent.Client) *Resolver { return &Resolver{client: client} }
