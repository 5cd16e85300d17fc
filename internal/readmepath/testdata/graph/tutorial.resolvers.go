package graph

// The app's own resolvers from before it added idem, as entgql's tutorial
// writes them (with the Mutation type they served in tutorial.graphql).
// gqlgen keeps each body under the generated mutation's signature, and
// idemgen turns entgql's default create into the claimed row: kept as
// they are, each key would leave two rows.

import (
	"context"

	"example.com/app/ent"
	"example.com/app/ent/book"
)

// CreateBook is the resolver for the createBook field.
func (r *mutationResolver) CreateBook(ctx context.Context, input ent.CreateBookInput) (*ent.Book, error) {
	return r.client.Book.Create().SetInput(input).Save(ctx)
}

// CreateAuthor is the resolver for the createAuthor field.
func (r *mutationResolver) CreateAuthor(ctx context.Context, input ent.CreateAuthorInput) (*ent.Author, error) {
	return r.client.Author.Create().SetInput(input).Save(ctx)
}

// BooksTitled is the resolver for the booksTitled field.
func (r *queryResolver) BooksTitled(ctx context.Context, title string) (int, error) {
	return r.client.Book.Query().Where(book.Title(title)).Count(ctx)
}

// Mutation returns MutationResolver implementation.
func (r *Resolver) Mutation() MutationResolver { return &mutationResolver{r} }

// Query returns QueryResolver implementation.
func (r *Resolver) Query() QueryResolver { return &queryResolver{r} }

type mutationResolver struct{ *Resolver }
type queryResolver struct{ *Resolver }
