package idem_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit/testapp"
	"github.com/goovo/idem/internal/testkit/testapp/ent"
)

// logBuffer collects a test's log lines; the server writes from its own
// goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// onEveryBackend runs test on each backend, in parallel.
func onEveryBackend(t *testing.T, test func(t *testing.T, b idemtest.Kind)) {
	for _, b := range idemtest.Kinds() {
		t.Run(string(b), func(t *testing.T) {
			t.Parallel()
			test(t, b)
		})
	}
}

// loggedBench is the test application with the hook's log in a buffer.
func loggedBench(t *testing.T, b idemtest.Kind, cfg idem.Config) (*testapp.Bench, *logBuffer) {
	logs := &logBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return testapp.NewBench(t, b, cfg), logs
}

// databaseError makes the database fail the resolver for real, the way
// the clients saw it: on SQLite another writer finds the database
// locked by the mutation's own transaction (SQLITE_BUSY); on PostgreSQL the
// mutation's update waits for a row another transaction holds until its
// lock_timeout (SQLSTATE 55P03); on MariaDB until its
// innodb_lock_wait_timeout (1205).
func databaseError(t *testing.T, ctx context.Context, be *testapp.Bench, s *ent.Shipment) error {
	if be.DB.Kind == idemtest.MariaDB {
		return mariaDBLockWait(ctx, be, s)
	}
	if be.DB.Kind == idemtest.SQLite {
		other, err := sql.Open("sqlite", "file:"+be.DB.DSN+"?_pragma=busy_timeout(10)&_txlock=immediate")
		if err != nil {
			return err
		}
		defer other.Close()
		tx, err := other.BeginTx(ctx, nil)
		if err == nil {
			_ = tx.Rollback()
			t.Error("a second writer got the SQLite write lock while the mutation held it")
		}
		return fmt.Errorf("provider: charge: %w", err)
	}
	other, err := sql.Open("pgx", be.DB.DSN)
	if err != nil {
		return err
	}
	defer other.Close()
	holder, err := other.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, "SELECT 1 FROM shipments WHERE id = $1 FOR UPDATE", s.ID); err != nil {
		return err
	}
	tx := ent.FromContext(ctx)
	if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = '20ms'"); err != nil {
		return err
	}
	return tx.Shipment.UpdateOneID(s.ID).SetLabel("locked out").Exec(ctx)
}

// mariaDBLockWait is databaseError on MariaDB.
func mariaDBLockWait(ctx context.Context, be *testapp.Bench, s *ent.Shipment) error {
	holder, err := be.DB.Driver.DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, "SELECT 1 FROM shipments WHERE idempotency_key = 'db-error' FOR UPDATE"); err != nil {
		return err
	}
	tx := ent.FromContext(ctx)
	// A session's setting (MySQL has no SET LOCAL), put back after.
	if _, err := tx.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
		return err
	}
	defer tx.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = DEFAULT")
	return tx.Shipment.UpdateOneID(s.ID).SetLabel("locked out").Exec(ctx)
}

// A database error inside a mutation reaches the client as
// INTERNAL_SERVER_ERROR with a correlation id and none of the driver's
// text, although gqlgen wraps it in a GraphQL error before any presenter
// sees it; the log has the cause under the same id. The attempt is
// released, and the retry runs.
func TestDatabaseErrorsNeverReachClients(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, b idemtest.Kind) {
		be, logs := loggedBench(t, b, idem.Config{})
		fail := true
		be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
			if !fail {
				return nil
			}
			fail = false
			return databaseError(t, ctx, be, s)
		}
		r := be.Post("org-1", "db-error", 100)
		if r.Code() != string(idemcode.InternalServerError) || r.Outcome("createShipment") != idemcode.OutcomeReleased {
			t.Fatalf("database error: %s", r.Body)
		}
		for _, leak := range []string{"SQLITE", "locked", "SQLSTATE", "lock timeout", "55P03", "1205", "Lock wait", "provider", "database"} {
			if strings.Contains(string(r.Body), leak) {
				t.Fatalf("the client saw %q: %s", leak, r.Body)
			}
		}
		id, _ := r.Errors[0].Extensions["correlationId"].(string)
		if id == "" || !strings.Contains(r.Errors[0].Message, id) {
			t.Fatalf("no correlation id: %s", r.Body)
		}
		cause := map[idemtest.Kind]string{idemtest.SQLite: "SQLITE_BUSY", idemtest.MariaDB: "1205"}[b]
		if b.IsPostgres() {
			cause = "55P03"
		}
		line := logLine(logs.String(), id)
		if !strings.Contains(line, cause) {
			t.Fatalf("the log has no line with %s and the cause %s:\n%s", id, cause, logs)
		}
		if retry := be.Post("org-1", "db-error", 100); len(retry.Errors) > 0 || retry.Outcome("createShipment") != idemcode.OutcomeExecuted {
			t.Fatalf("retry after a released attempt: %s", retry.Body)
		}
	})
}

// logLine returns the log line that mentions s, or "".
func logLine(logs, s string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// What the application wrote for clients reaches them as written, with a
// code when it had none; what it did not write is replaced. Presentation
// does not depend on the backend: SQLite only.
func TestErrorsWrittenForClientsAreKept(t *testing.T) {
	be, logs := loggedBench(t, idemtest.SQLite, idem.Config{})
	cases := []struct {
		name     string
		err      func() error
		panics   any
		message  string // "" for the generic one
		code     string
		outcome  string
		logMatch string // for the generic answers: the log line with the id has it
	}{
		{name: "plain error", err: func() error { return fmt.Errorf("pq: relation %q: %w", "secret_table", errors.New("boom")) },
			code: string(idemcode.InternalServerError), outcome: idemcode.OutcomeReleased, logMatch: "secret_table"},
		{name: "panic", panics: "the resolver exploded",
			code: string(idemcode.InternalServerError), outcome: idemcode.OutcomeReleased, logMatch: "the resolver exploded"},
		{name: "GraphQL error without a code", err: func() error { return gqlerror.Errorf("the warehouse is busy, try again") },
			message: "the warehouse is busy, try again", code: string(idemcode.InternalServerError), outcome: idemcode.OutcomeReleased},
		{name: "GraphQL error with a code", err: func() error {
			return &gqlerror.Error{Message: "out of stock", Extensions: map[string]any{"code": "OUT_OF_STOCK"}}
		}, message: "out of stock", code: "OUT_OF_STOCK", outcome: idemcode.OutcomeReleased},
		{name: "a message over a cause", err: func() error {
			return &gqlerror.Error{Message: "the carrier is unavailable", Err: errors.New("dial tcp 10.0.0.7:443: refused")}
		}, message: "the carrier is unavailable", code: string(idemcode.InternalServerError), outcome: idemcode.OutcomeReleased},
		{name: "final plain error", err: func() error { return idem.Final(errors.New("parcel refused by the carrier")) },
			message: "parcel refused by the carrier", code: "MUTATION_FAILED", outcome: idemcode.OutcomeExecuted},
		{name: "final GraphQL error", err: func() error { return idem.Final(gqlerror.Errorf("too heavy")) },
			message: "too heavy", code: "MUTATION_FAILED", outcome: idemcode.OutcomeExecuted},
		{name: "final GraphQL error with a code", err: func() error {
			return idem.Final(&gqlerror.Error{Message: "too heavy", Extensions: map[string]any{"code": "TOO_HEAVY"}})
		}, message: "too heavy", code: "TOO_HEAVY", outcome: idemcode.OutcomeExecuted},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be.Resolver.Hook = func(context.Context, *ent.Shipment) error {
				if c.panics != nil {
					panic(c.panics)
				}
				return c.err()
			}
			key := fmt.Sprintf("case-%d", i)
			r := be.Post("org-1", key, 100)
			if len(r.Errors) != 1 || r.Code() != c.code || r.Outcome("createShipment") != c.outcome {
				t.Fatalf("%s", r.Body)
			}
			msg := r.Errors[0].Message
			id, _ := r.Errors[0].Extensions["correlationId"].(string)
			if c.message != "" {
				if msg != c.message || id != "" {
					t.Fatalf("the message was not kept as written: %s", r.Body)
				}
			} else if id == "" || !strings.HasPrefix(msg, "internal server error") || !strings.Contains(logLine(logs.String(), id), c.logMatch) {
				t.Fatalf("%s\nlog:\n%s", r.Body, logs)
			}
			if c.outcome == idemcode.OutcomeExecuted {
				// Stored and replayed: presented again, unchanged.
				replay := be.Post("org-1", key, 100)
				if replay.Outcome("createShipment") != idemcode.OutcomeReplayed || !sameErrors(string(replay.Body), string(r.Body)) {
					t.Fatalf("replay:\n%s\n%s", r.Body, replay.Body)
				}
			}
		})
	}
	be.Resolver.Hook = nil

	// An argument that does not parse (a UUID here) is the client's input,
	// reported by gqlgen before the resolver runs: BAD_USER_INPUT.
	r := be.GQL("org-1", `mutation { approveShipment(idempotencyKey: "arg", id: "not-a-uuid") { id } }`, nil)
	if r.Code() != string(idemcode.BadUserInput) || !strings.Contains(strings.ToLower(r.Errors[0].Message), "uuid") {
		t.Fatalf("argument error: %s", r.Body)
	}
	// A validation error keeps gqlgen's code.
	if r := be.GQL("org-1", `mutation { createShipment(idempotencyKey: "v") { nope } }`, nil); r.Code() != "GRAPHQL_VALIDATION_FAILED" {
		t.Fatalf("validation error: %s", r.Body)
	}
	// A body that is not JSON is a bad request.
	res, err := http.Post(be.Endpoint, "application/json", strings.NewReader(`{"query": `))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte(`"code":"BAD_REQUEST"`)) {
		t.Fatalf("undecodable body: %d %s", res.StatusCode, body)
	}
}

// sameErrors compares the "errors" members of two response bodies.
func sameErrors(a, b string) bool {
	cut := func(s string) string {
		i, j := strings.Index(s, `"errors":`), strings.Index(s, `,"data"`)
		if i < 0 || j < i {
			return s
		}
		return s[i:j]
	}
	return cut(a) == cut(b)
}

// Config.MapError turns an application's own errors into errors for
// clients before they become INTERNAL_SERVER_ERROR, and is asked first
// about ent's not-found and constraint errors: here ent's NotFound, met for
// real, into an error of the application's. The error is final (ent's
// not-found is, by default), and an error it does not map stays
// unexpected. Presentation does not depend on the backend:
// SQLite only.
func TestMapErrorPresentsApplicationErrors(t *testing.T) {
	be, logs := loggedBench(t, idemtest.SQLite, idem.Config{
		MapError: func(ctx context.Context, err error) *gqlerror.Error {
			if ent.IsNotFound(err) {
				return &gqlerror.Error{Message: "no such shipment", Extensions: map[string]any{"code": "NOT_FOUND"}}
			}
			return nil
		},
	})
	be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
		_, err := ent.FromContext(ctx).Shipment.Get(ctx, uuid.New())
		return err
	}
	r := be.Post("org-1", "missing", 100)
	if len(r.Errors) != 1 || r.Code() != "NOT_FOUND" || r.Errors[0].Message != "no such shipment" ||
		r.Outcome("createShipment") != idemcode.OutcomeExecuted {
		t.Fatalf("mapped error: %s", r.Body)
	}
	if _, ok := r.Errors[0].Extensions["correlationId"]; ok || len(r.Errors[0].Path) == 0 {
		t.Fatalf("a mapped error has its path and no correlation id: %s", r.Body)
	}
	if strings.Contains(logs.String(), "unexpected error") {
		t.Fatalf("a mapped error was logged as unexpected:\n%s", logs)
	}

	be.Resolver.Hook = func(context.Context, *ent.Shipment) error { return errors.New("disk full") }
	if r := be.Post("org-1", "other", 100); r.Code() != string(idemcode.InternalServerError) || strings.Contains(string(r.Body), "disk full") {
		t.Fatalf("an error MapError leaves alone: %s", r.Body)
	}
}

// ent's not-found and constraint errors, which a request meets again on
// every run, are final without any Config.MapError: the client gets
// NOT_FOUND ("shipment not found") or BAD_USER_INPUT, with none of the
// database's text, stored and replayed to a retry of the key, and no
// pending record is left. Marked idem.Retryable, such an error is released.
func TestEntErrorsAreFinalByDefault(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, b idemtest.Kind) {
		be, logs := loggedBench(t, b, idem.Config{})
		be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
			_, err := ent.FromContext(ctx).Shipment.Get(ctx, uuid.New())
			return err
		}
		r := be.Post("org-1", "missing", 100)
		if len(r.Errors) != 1 || r.Code() != string(idemcode.NotFound) || r.Errors[0].Message != "shipment not found" ||
			r.Outcome("createShipment") != idemcode.OutcomeExecuted || len(r.Errors[0].Path) == 0 {
			t.Fatalf("not found: %s", r.Body)
		}
		if again := be.Post("org-1", "missing", 100); !again.Replayed || !sameErrors(string(r.Body), string(again.Body)) {
			t.Fatalf("retry of a not-found: %s\nfirst: %s", again.Body, r.Body)
		}

		// A constraint: a hand-written mutation (its records are
		// IdempotencyRecord rows) makes a shipment with another's key.
		be.Resolver.Hook = nil
		first := be.Post("org-1", "taken", 100)
		var created struct{ CreateShipment struct{ ID string } }
		if err := json.Unmarshal(first.Data, &created); err != nil || created.CreateShipment.ID == "" {
			t.Fatalf("first shipment: %s", first.Body)
		}
		be.Resolver.Hook = func(ctx context.Context, _ *ent.Shipment) error {
			return ent.FromContext(ctx).Shipment.Create().
				SetOrg("org-1").SetDestination("Lyon").SetWeightGrams(1).SetIdempotencyKey("taken").
				Exec(ctx)
		}
		approve := `mutation($id: ID!) { approveShipment(idempotencyKey: "dup", id: $id) { id } }`
		vars := map[string]any{"id": created.CreateShipment.ID}
		r = be.GQL("org-1", approve, vars)
		if len(r.Errors) != 1 || r.Code() != string(idemcode.BadUserInput) || !strings.Contains(r.Errors[0].Message, "constraint") ||
			r.Outcome("approveShipment") != idemcode.OutcomeExecuted {
			t.Fatalf("constraint: %s", r.Body)
		}
		for _, leak := range []string{"UNIQUE", "unique constraint", "duplicate", "SQLSTATE", "23505", "shipments", "ent:"} {
			if strings.Contains(string(r.Body), leak) {
				t.Fatalf("the client saw %q: %s", leak, r.Body)
			}
		}
		if again := be.GQL("org-1", approve, vars); !again.Replayed || !sameErrors(string(r.Body), string(again.Body)) {
			t.Fatalf("retry of a constraint error: %s", again.Body)
		}
		if strings.Contains(logs.String(), "unexpected error") {
			t.Fatalf("ent's errors were logged as unexpected:\n%s", logs)
		}

		// Marked Retryable: released, and the retry runs again.
		be.Resolver.Hook = func(ctx context.Context, s *ent.Shipment) error {
			_, err := ent.FromContext(ctx).Shipment.Get(ctx, uuid.New())
			return idem.Retryable(err)
		}
		if r := be.Post("org-1", "retryable", 100); r.Outcome("createShipment") != idemcode.OutcomeReleased {
			t.Fatalf("not found marked retryable: %s", r.Body)
		}
	})
}
