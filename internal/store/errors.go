package store

import (
	"context"
	"errors"
)

// The kinds of store failure. Every error a driver returns is an *Error of
// one of these kinds (or of none, for a failure it cannot classify); test
// them with errors.Is. None of them ever means "the key is taken": that is
// an answer (Claimed.Won false), not an error.
var (
	// ErrUnreachable: the database cannot be reached or opened.
	ErrUnreachable = errors.New("database unreachable")
	// ErrBusy: the database is locked by other work past the busy timeout
	// (SQLite's one writer).
	ErrBusy = errors.New("database busy")
	// ErrLockTimeout: a statement waited for a lock, or ran, past its
	// timeout.
	ErrLockTimeout = errors.New("lock or statement timeout")
	// ErrConflict: the transaction conflicted with another (serialization
	// failure, deadlock) and was rolled back.
	ErrConflict = errors.New("transaction conflict")
	// ErrNoTable: a record table does not exist: the database is not the
	// application's, or it was not migrated.
	ErrNoTable = errors.New("table missing")
	// ErrUnstorable: the database refused text it cannot store (on
	// PostgreSQL a NUL character, or bytes that are not UTF-8; on MySQL
	// and MariaDB bytes that are not UTF-8 in a utf8mb4 column). The input
	// is at fault, not the database: the same statement fails the same
	// way every time, so it is no outage.
	ErrUnstorable = errors.New("text the database cannot store")
)

// Unstorable reports whether err is, or wraps, a database's refusal of text
// it cannot store: an *Error of kind ErrUnstorable, or a driver's error
// the store would classify so (a resolver's own write, say, which never
// passed through the store).
func Unstorable(err error) bool {
	return errors.Is(err, ErrUnstorable) || postgresUnstorable(err) || mysqlUnstorable(err)
}

// Error is a failure of the record store itself: the database could not be
// reached, or a statement failed.
type Error struct {
	// Op is the store's operation ("lookup", "claim", "complete", …).
	Op string
	// Kind is one of the Err* kinds, or nil.
	Kind error
	// Backend names the database for people: "PostgreSQL", "SQLite" or
	// "MySQL" (MySQL and MariaDB).
	Backend string
	// Detail is the database's own message, for operators; never for a
	// GraphQL client.
	Detail string
	// Hint says what an operator can do about the failure, when the
	// backend knows; "" otherwise.
	Hint string
	// Err is the driver's error.
	Err error
}

func (e *Error) Error() string { return "idempotency store: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the driver's error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the error's kind.
func (e *Error) Is(target error) bool { return e.Kind != nil && target == e.Kind }

// classifier turns a driver's error into a kind, the database's own
// message and an operator's hint (kind nil when it cannot tell).
type classifier func(err error) (kind error, detail, hint string)

// wrap makes err an *Error of op, classified by the backend; nil stays nil,
// and an *Error (already translated) keeps its kind.
func wrap(backend string, classify classifier, op string, err error) error {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) {
		return err
	}
	e := &Error{Op: op, Backend: backend, Detail: err.Error(), Err: err}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return e // the caller's doing: errors.Is sees the context error
	}
	kind, detail, hint := classify(err)
	e.Kind, e.Hint = kind, hint
	if detail != "" {
		e.Detail = detail
	}
	return e
}
