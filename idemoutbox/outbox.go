// Package idemoutbox is the transactional outbox of idempotent mutations,
// on River (github.com/riverqueue/river): a resolver records the effects
// that must happen after its result commits (a receipt e-mail, a webhook,
// a message to another service) as River jobs, inserted in the transaction
// that stores the result, so that a job exists if and only if the result
// committed:
//
//	func (r *Resolver) pay(ctx context.Context, p *ent.Payment) (*ent.Payment, error) {
//		// … the business writes, through ent.FromContext(ctx) …
//		if _, err := idemoutbox.Enqueue(ctx, SendReceiptArgs{PaymentID: p.ID}, nil); err != nil {
//			return nil, err // retryable: the attempt is rolled back and released
//		}
//		return p, nil
//	}
//
// In lease mode the job is inserted in the completion's transaction, in
// atomic mode in the one transaction; either way it commits with the
// fenced write of the result. An attempt that is rolled back (a retryable
// error, a final error, which keeps none of the resolver's writes, a crash)
// or that lost its claim to a takeover (its completion is fenced out) leaves
// no job, and of the attempts of one key only one commits: a key's effects
// are enqueued once, whatever the retries and takeovers.
//
// River delivers each job at least once: a worker that did its effect and
// died before River recorded it runs again. Each job carries a downstream
// key (DownstreamKey), derived from the tenant, the record, the
// idempotency key and the job's place among the attempt's jobs, which the
// receiver deduplicates by, as the hook does with the client's key.
//
// The application owns River: it migrates River's tables (rivermigrate,
// or cmd/migrate's files), registers its workers and runs a River client
// on the same database (riverpgxv5 over idemdb's pgx pool, riversqlite or
// riverdatabasesql over the *sql.DB). The outbox owns nothing but the
// transaction and the key. See docs/outbox.md.
package idemoutbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"

	"github.com/goovo/idem/idemdb/pgxdriver"
	"github.com/goovo/idem/internal/effects"
)

// MetadataKey is the key of a job's metadata (rivertype.JobRow.Metadata)
// that holds its downstream key.
const MetadataKey = "idem_downstream_key"

// ErrNoAttempt is Enqueue's error outside the resolver of an idempotent
// mutation: there is no transaction whose commit the job could follow.
var ErrNoAttempt = errors.New("idemoutbox: Enqueue must be called from the resolver of an idempotent mutation, with its context")

// ErrMySQL is the outbox's error on MySQL and MariaDB (ent's "mysql"
// dialect): River, which works the outbox's jobs, has no driver for them
// (its drivers are PostgreSQL's and SQLite's). Migrate, Validate, Stats
// and Enqueue return it at once, so that a server refuses to start
// rather than half-working. On MySQL, an effect that must follow the
// commit is written by the resolver to a table of its own in the
// mutation's transaction and delivered by a worker of the application's
// choosing, with EffectKey's key (DownstreamKey's rule; docs/mysql.md,
// and the example server's receipt table).
var ErrMySQL = errors.New("idemoutbox: River has no MySQL or MariaDB driver: the outbox runs on PostgreSQL or SQLite only (docs/mysql.md says what to use instead)")

// Enqueue inserts a River job with args and opts (nil: River's defaults and
// args' InsertOpts) into the transaction of the idempotent mutation
// running in ctx, the resolver's context: the job is worked once that
// transaction commits, and never if it does not. Its metadata carries its
// downstream key (MetadataKey), merged into opts.Metadata.
//
// The River client that works the job must be on the same database, with
// a worker for args' kind. An error (the database's) is retryable: the
// resolver returns it, and the attempt is rolled back and released.
func Enqueue(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	s := effects.From(ctx)
	if s == nil || s.Tx == nil {
		return nil, ErrNoAttempt
	}
	o := &river.InsertOpts{}
	if opts != nil {
		cp := *opts
		o = &cp
	}
	if s.Dialect == "mysql" {
		return nil, ErrMySQL
	}
	meta := map[string]any{}
	if len(o.Metadata) > 0 {
		if err := json.Unmarshal(o.Metadata, &meta); err != nil {
			return nil, fmt.Errorf("idemoutbox: InsertOpts.Metadata must be a JSON object: %w", err)
		}
	}
	meta[MetadataKey] = downstreamKey(s, args.Kind(), s.Next(args.Kind()))
	var err error
	if o.Metadata, err = json.Marshal(meta); err != nil {
		return nil, err
	}

	switch tx := s.Tx.(type) {
	case *pgxdriver.Tx:
		return pgxInserter().InsertTx(ctx, tx.Pgx(), args, o)
	case *entsql.Tx:
		stx, ok := tx.Tx.(*sql.Tx)
		if !ok {
			return nil, fmt.Errorf("idemoutbox: unsupported database/sql transaction %T", tx.Tx)
		}
		if s.Dialect == "sqlite3" {
			return sqliteInserter().InsertTx(ctx, stx, args, o)
		}
		return sqlInserter().InsertTx(ctx, stx, args, o)
	}
	return nil, fmt.Errorf("idemoutbox: unsupported transaction %T (want idemdb's pgx driver or ent's database/sql driver)", s.Tx)
}

// downstreamKey is the key of the n-th job of kind of the attempt in s:
// the same for every attempt of the record's key, so that the receiver
// deduplicates whatever delivered it. A call without an idempotency key
// has nothing to be the same as: its jobs get random keys.
func downstreamKey(s *effects.Scope, kind string, n int) string {
	if s.Key == "" {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	h := sha256.New()
	for _, part := range []string{s.Tenant, s.Table, s.Key, kind, strconv.Itoa(n)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// EffectKey returns the downstream key of the next effect of kind that
// the idempotent mutation running in ctx records itself, outside River:
// DownstreamKey's rule (the tenant, the record, the idempotency key, the
// kind and the effect's place among the attempt's effects of that kind,
// counted with Enqueue's), so that every attempt of a key gives its
// effect the same key and the receiver deduplicates whichever delivery
// reaches it. It is what an application on MySQL, where Enqueue refuses
// (ErrMySQL), writes beside the effect in a table of its own, in the
// mutation's transaction (docs/mysql.md). Outside a mutation it returns
// ErrNoAttempt.
func EffectKey(ctx context.Context, kind string) (string, error) {
	s := effects.From(ctx)
	if s == nil || s.Tx == nil {
		return "", ErrNoAttempt
	}
	return downstreamKey(s, kind, s.Next(kind)), nil
}

// DownstreamKey returns the downstream key of a job Enqueue inserted, ""
// for another job: what the worker hands to the receiver of the effect
// (an Idempotency-Key header, a message id) for it to deduplicate.
func DownstreamKey(job *rivertype.JobRow) string {
	var meta map[string]any
	if job == nil || json.Unmarshal(job.Metadata, &meta) != nil {
		return ""
	}
	k, _ := meta[MetadataKey].(string)
	return k
}

// The insert-only River clients of each driver: they insert in a
// transaction they are given, and work nothing.
var (
	pgxInserter = sync.OnceValue(func() *river.Client[pgx.Tx] {
		return mustInserter(riverpgxv5.New(nil))
	})
	sqlInserter = sync.OnceValue(func() *river.Client[*sql.Tx] {
		return mustInserter(riverdatabasesql.New(nil))
	})
	sqliteInserter = sync.OnceValue(func() *river.Client[*sql.Tx] {
		return mustInserter(riversqlite.New(nil))
	})
)

func mustInserter[TTx any](d riverdriver.Driver[TTx]) *river.Client[TTx] {
	c, err := river.NewClient[TTx](d, &river.Config{})
	if err != nil {
		panic("idemoutbox: River insert-only client: " + err.Error()) // only for a configuration River refuses, which this is not
	}
	return c
}
