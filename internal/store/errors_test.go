package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// PostgreSQL's errors are read by their SQLSTATE; the live ones
// (unreachable, missing table) are exercised against the database by the
// conformance suite and TestUnreachable.
func TestPostgresErrorKinds(t *testing.T) {
	for code, want := range map[string]error{
		"40001": ErrConflict,
		"40P01": ErrConflict,
		"55P03": ErrLockTimeout,
		"57014": ErrLockTimeout,
		"42P01": ErrNoTable,
		"08006": ErrUnreachable,
		"53300": ErrUnreachable,
		"57P01": ErrUnreachable,
		"22021": ErrUnstorable,
		"22P05": ErrUnstorable,
		"23505": nil,
	} {
		pg := &pgconn.PgError{Code: code, Message: "the server's words"}
		err := wrap("PostgreSQL", classifyPostgres, "complete", fmt.Errorf("ent: %w", pg))
		var se *Error
		if !errors.As(err, &se) || se.Kind != want || se.Detail != "the server's words" || !errors.Is(err, pg) {
			t.Errorf("%s: %#v, want kind %v", code, err, want)
		}
		if want != nil && !errors.Is(err, want) {
			t.Errorf("%s: errors.Is(%v) is false", code, want)
		}
	}
	// The caller's cancellation stays the caller's, not an outage.
	err := wrap("PostgreSQL", classifyPostgres, "lookup", context.Canceled)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnreachable) {
		t.Errorf("cancellation: %v", err)
	}
	if wrap("PostgreSQL", classifyPostgres, "lookup", nil) != nil {
		t.Error("nil is an error")
	}
}
