package idemschema

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"entgo.io/ent/schema/mixin"

	"github.com/goovo/idem/internal/directive"
	"github.com/goovo/idem/internal/record"
	"github.com/goovo/idem/internal/tenancy"
)

// Column names the mixin adds. They are fixed so that one record store can
// serve every mixed-in table; only the scope column may be renamed.
const (
	DefaultScopeField     = record.DefaultScope
	FieldKey              = record.Key
	FieldStatus           = record.Status
	FieldFingerprint      = record.Fingerprint
	FieldResponse         = record.Response
	FieldAttempt          = record.Attempt
	FieldLeaseExpiresAt   = record.LeaseExpiresAt
	FieldClaimedAt        = record.ClaimedAt
	FieldCompletedAt      = record.CompletedAt
	FieldArchivedAt       = record.ArchivedAt
	FieldOperation        = record.Operation
	maxKeyLength          = record.MaxKeyLength
	annotationName        = "Idempotent"
	defaultScopeMaxLength = 255
	fingerprintMaxLength  = 255
)

// Mixin makes an ent entity its own idempotency record, as the article's
// payment_requests table is: the row that a create mutation inserts is also
// the claim on (scope, idempotency_key).
//
// It adds the scope field (tenant_id, unless Scope names a field the entity
// already has), the idempotency fields, the unique index on
// (scope, idempotency_key) that decides who owns a key, and an index on the
// completion time for the retention sweeper. Rows created without a key are
// allowed: NULL keys never collide.
//
// Rows whose claim is pending or failed are not business facts; the mixin's
// interceptor hides them from ent queries (see [IncludeUnfinished]).
//
//	func (Payment) Mixin() []ent.Mixin {
//		return []ent.Mixin{idemschema.Mixin{}}
//	}
type Mixin struct {
	mixin.Schema

	// Scope names an existing string field of the entity that holds the
	// tenant. Empty (the default) adds a "tenant_id" field.
	Scope string

	// Isolate makes the scope a row filter: ent queries of the entity
	// (entgql's node and nodes included) see only the rows of the tenant in
	// the context (idem.WithTenant; the hook puts it there for every
	// GraphQL request), updates and deletes touch only those rows, and a
	// row may only be linked to rows of its own tenant, a link to another
	// tenant's row failing as one to a row that does not exist. A query
	// without a tenant in its context fails (ErrNoTenant) unless the
	// context comes from AllTenants. Default false.
	Isolate bool
}

var _ ent.Mixin = Mixin{}

// ScopeField returns the name of the field that scopes keys.
func (m Mixin) ScopeField() string {
	if m.Scope != "" {
		return m.Scope
	}
	return DefaultScopeField
}

// The column types of the mixin's times and bytes on MySQL and MariaDB,
// where ent's defaults lose what the protocol needs: a TIMESTAMP keeps
// whole seconds (leases and completion times need microseconds, as
// PostgreSQL's timestamptz keeps them) and ends in 2038, and a BLOB holds
// 64 KiB (a stored response or operation may be larger). DATETIME(6)
// holds no time zone: the store writes and compares UTC only (its clock is
// the database's UTC_TIMESTAMP(6)). PostgreSQL and SQLite keep ent's types.
var (
	mysqlTime  = map[string]string{dialect.MySQL: "datetime(6)"}
	mysqlBytes = map[string]string{dialect.MySQL: "longblob"}
)

// Fields of the mixin.
func (m Mixin) Fields() []ent.Field {
	hidden := entgql.Skip(entgql.SkipAll)
	var fields []ent.Field
	if m.Scope == "" {
		fields = append(fields, field.String(DefaultScopeField).
			NotEmpty().
			MaxLen(defaultScopeMaxLength).
			Immutable().
			Comment("Tenant that owns the row; idempotency keys are unique per tenant.").
			Annotations(hidden))
	}
	return append(fields,
		field.String(FieldKey).
			Optional().Nillable().Immutable().
			MaxLen(maxKeyLength).
			Comment("Client-chosen key of the intent that created the row; NULL for rows created without one.").
			Annotations(hidden),
		field.Enum(FieldStatus).
			Values(record.StatusPending, record.StatusSucceeded, record.StatusFailed).
			Optional().Nillable().
			Comment("State of the claim: pending while an attempt runs, then succeeded or failed.").
			Annotations(hidden),
		field.String(FieldFingerprint).
			Optional().Immutable().
			MaxLen(fingerprintMaxLength).
			Comment("Hash of the mutation, its arguments and its selection set.").
			Annotations(hidden),
		field.Bytes(FieldResponse).
			Optional().Nillable().
			SchemaType(mysqlBytes).
			Comment("Stored result of the finished attempt, replayed to every retry.").
			Annotations(hidden),
		field.Int(FieldAttempt).
			Default(0).NonNegative().
			Comment("Fencing token: bumped by every takeover; only the current attempt may complete.").
			Annotations(hidden),
		field.Time(FieldLeaseExpiresAt).
			Optional().Nillable().
			SchemaType(mysqlTime).
			Comment("Database time after which a pending claim may be taken over.").
			Annotations(hidden),
		field.Time(FieldClaimedAt).
			Optional().Nillable().Immutable().
			SchemaType(mysqlTime).
			Comment("Database time of the first claim.").
			Annotations(hidden),
		field.Time(FieldCompletedAt).
			Optional().Nillable().
			SchemaType(mysqlTime).
			Comment("Database time at which the result was stored.").
			Annotations(hidden),
		field.Time(FieldArchivedAt).
			Optional().Nillable().
			SchemaType(mysqlTime).
			Comment("Database time at which the sweeper moved the response to the archive; the row is a tombstone.").
			Annotations(hidden),
		field.Bytes(FieldOperation).
			Optional().Nillable().Immutable().
			SchemaType(mysqlBytes).
			Comment("The mutation's operation and variables, kept so that the server can finish a claim its client abandoned; NULL when the mutation opted out of recovery.").
			Annotations(hidden),
	)
}

// Indexes of the mixin.
//
// Besides the unique index that decides who owns a key, three partial
// indexes keep the sweeper's and the operator's work proportional to the rows
// they look for, not to the table: finished records still holding their
// response (to archive), tombstones (to purge), pending claims (stuck work).
func (m Mixin) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields(m.ScopeField(), FieldKey).Unique(),
		index.Fields(FieldCompletedAt).
			Annotations(entsql.IndexWhere(record.ToArchive)),
		index.Fields(FieldArchivedAt).
			Annotations(entsql.IndexWhere(record.Tombstone)),
		index.Fields(FieldLeaseExpiresAt).
			Annotations(entsql.IndexWhere(record.Pending)),
	}
}

// Annotations of the mixin: they tell the code generator that the entity is
// an idempotency record and which field scopes its keys.
func (m Mixin) Annotations() []schema.Annotation {
	return []schema.Annotation{Annotation{ScopeField: m.ScopeField(), Isolate: m.Isolate}}
}

// Interceptors of the mixin: pending and failed claims are hidden from ent
// queries, except the caller's own claim inside its idempotent mutation;
// with Isolate, so are other tenants' rows.
func (m Mixin) Interceptors() []ent.Interceptor {
	scope, isolate := m.ScopeField(), m.Isolate
	return []ent.Interceptor{
		ent.TraverseFunc(func(ctx context.Context, q ent.Query) error {
			wq, ok := q.(wherer)
			if !ok {
				if isolate {
					return errNotGenerated
				}
				return nil
			}
			if isolate && !tenancy.AllTenants(ctx) {
				tenant, ok := tenancy.Tenant(ctx)
				if !ok {
					return ErrNoTenant
				}
				wq.WhereIdempotency(sql.FieldEQ(scope, tenant))
			}
			if !includeUnfinished(ctx) {
				own, _ := tenancy.ClaimOf(ctx)
				wq.WhereIdempotency(visible(scope, own))
			}
			return nil
		}),
	}
}

// wherer is implemented by the query builders of mixed-in entities; the
// idemgen extension generates the method.
type wherer interface {
	WhereIdempotency(func(*sql.Selector))
}

// visible keeps rows created without a key, finished successes, and the row
// of the caller's own claim.
func visible(scope string, own tenancy.Claim) func(*sql.Selector) {
	return func(s *sql.Selector) {
		preds := []*sql.Predicate{
			sql.IsNull(s.C(FieldStatus)),
			sql.EQ(s.C(FieldStatus), record.StatusSucceeded),
		}
		if own.Key != "" && own.Table == s.TableName() {
			preds = append(preds, sql.And(
				sql.EQ(s.C(scope), own.Tenant),
				sql.EQ(s.C(FieldKey), own.Key),
			))
		}
		s.Where(sql.Or(preds...))
	}
}

type includeUnfinishedKey struct{}

// IncludeUnfinished returns a context in which ent queries also return rows
// whose idempotency claim is pending or failed (for operators and tests).
func IncludeUnfinished(ctx context.Context) context.Context {
	return context.WithValue(ctx, includeUnfinishedKey{}, true)
}

func includeUnfinished(ctx context.Context) bool {
	v, _ := ctx.Value(includeUnfinishedKey{}).(bool)
	return v
}

// Annotation marks an ent schema as an idempotency record and configures
// its generated create mutation. The mixin adds it with the scope field; a
// schema adds options with Atomic, Lease or NoCreateMutation, which merge.
type Annotation struct {
	// ScopeField is the field that holds the tenant.
	ScopeField string `json:"scope_field,omitempty"`
	// Mode of the generated create mutation: "LEASE" (default) or "ATOMIC".
	Mode string `json:"mode,omitempty"`
	// LeaseSeconds overrides the hook's lease for the generated create
	// mutation.
	LeaseSeconds int `json:"lease_seconds,omitempty"`
	// NoCreate: generate no create mutation; the entity only holds the
	// records of @idempotent mutations that name it.
	NoCreate bool `json:"no_create,omitempty"`
	// RetentionSeconds overrides the hook's retention window for the
	// entity's records.
	RetentionSeconds int `json:"retention_seconds,omitempty"`
	// KeyOptional makes the key of the generated create mutation optional
	// during a rollout; see KeyOptional.
	KeyOptional bool `json:"key_optional,omitempty"`
	// Isolate is Mixin.Isolate.
	Isolate bool `json:"isolate,omitempty"`
	// NoRecover: see NoRecover.
	NoRecover bool `json:"no_recover,omitempty"`
	// FingerprintExclude: see FingerprintExclude.
	FingerprintExclude []string `json:"fingerprint_exclude,omitempty"`
}

// Atomic makes the generated create mutation run in atomic mode: claim,
// writes and result commit in one transaction, and concurrent duplicates
// wait for it and replay its result. Use it when the mutation's effects live
// in this database only.
func Atomic() Annotation { return Annotation{Mode: directive.ModeAtomic} }

// Lease sets how long a pending claim of the generated create mutation
// belongs to its attempt (whole seconds, at least one).
func Lease(d time.Duration) Annotation {
	return Annotation{LeaseSeconds: max(1, int(d.Round(time.Second)/time.Second))}
}

// Retention sets how long the entity's finished records keep their response
// for replay (whole seconds, at least one) before the sweeper archives it;
// the default is the hook's (24 hours).
func Retention(d time.Duration) Annotation {
	return Annotation{RetentionSeconds: max(1, int(d.Round(time.Second)/time.Second))}
}

// NoCreateMutation keeps the generator from adding a create mutation for the
// entity: it only holds the records of @idempotent mutations that name it.
// An application that keeps its own create<T> mutation uses it, and opts
// that mutation in with @idempotent(record: "<T>").
func NoCreateMutation() Annotation { return Annotation{NoCreate: true} }

// KeyOptional eases the rollout of the entity's generated create mutation
// to clients that do not send keys yet: its key argument is optional
// (idempotencyKey: String, @idempotent(keyRequired: false)), and a call
// without a key runs as the mutation did before, with no claim and no
// record, counted in the hook's idem.keyless metric. Remove it once the
// metric stays at zero: the key is then required again. idemgen's
// WithKeyOptional does the same for every entity.
func KeyOptional() Annotation { return Annotation{KeyOptional: true} }

// NoRecover is for a generated create mutation that must not run without a
// live client (@idempotent(recover: false)): the server's recoverer
// (idem.Config.RecoverAfter) never runs a claim its client abandoned again;
// such a claim waits for its client's retry, and past the retention window
// is stored as failed with IDEMPOTENCY_ABANDONED.
func NoRecover() Annotation { return Annotation{NoRecover: true} }

// FingerprintExclude names argument paths of the generated create mutation
// that do not count when a retry is compared with the first request
// (@idempotent(fingerprintExclude:)): fields that change on every retry, a
// client timestamp or SDK metadata, as "input.clientTime". A retry that
// changes only them replays the first result instead of being refused
// with IDEMPOTENCY_KEY_REUSED; the trade-off is that a changed excluded
// field is never seen, and the retry gets the first request's result. Each
// path must be a field of the entity's create input: generation fails
// otherwise.
func FingerprintExclude(paths ...string) Annotation { return Annotation{FingerprintExclude: paths} }

// Name implements schema.Annotation.
func (Annotation) Name() string { return annotationName }

// Merge implements schema.Merger: set fields of other win.
func (a Annotation) Merge(other schema.Annotation) schema.Annotation {
	var o Annotation
	switch v := other.(type) {
	case Annotation:
		o = v
	case *Annotation:
		if v == nil {
			return a
		}
		o = *v
	default:
		return a
	}
	if o.ScopeField != "" {
		a.ScopeField = o.ScopeField
	}
	if o.Mode != "" {
		a.Mode = o.Mode
	}
	if o.LeaseSeconds != 0 {
		a.LeaseSeconds = o.LeaseSeconds
	}
	if o.RetentionSeconds != 0 {
		a.RetentionSeconds = o.RetentionSeconds
	}
	a.NoCreate = a.NoCreate || o.NoCreate
	a.KeyOptional = a.KeyOptional || o.KeyOptional
	a.Isolate = a.Isolate || o.Isolate
	a.NoRecover = a.NoRecover || o.NoRecover
	a.FingerprintExclude = append(slices.Clip(a.FingerprintExclude), o.FingerprintExclude...)
	return a
}

// Decode decodes the annotation as stored in the generator's graph.
func (a *Annotation) Decode(v any) error {
	buf, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(buf, a)
}

var (
	_ schema.Annotation = Annotation{}
	_ schema.Merger     = Annotation{}
)
