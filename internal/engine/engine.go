package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/directive"
	"github.com/goovo/idem/internal/fingerprint"
	"github.com/goovo/idem/internal/idemkey"
	"github.com/goovo/idem/internal/record"
	"github.com/goovo/idem/internal/refusal"
	"github.com/goovo/idem/internal/reqstate"
	"github.com/goovo/idem/internal/store"
)

// Config is what the engine runs with: idem.Config, checked and with its
// defaults filled in by package idem (see idem.Config for each field).
type Config struct {
	Backend          idembackend.Backend
	Tenant           func(ctx context.Context) (string, error)
	KeyOwner         func(ctx context.Context) string
	Lease            time.Duration
	Retention        time.Duration // the default; a record table may set its own
	WaitForInFlight  time.Duration
	KeyHeader        bool
	MaxResponseBytes int
	MaxArgumentBytes int
	// NoOneStatement turns the claim born completed off (born.go).
	NoOneStatement bool
	// Offset moves the database clock as the engine reads it (tests).
	Offset         func() time.Duration
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	Logger         *slog.Logger
	RecoverAfter   time.Duration
	// AttemptTimeout bounds an attempt once it has claimed its key
	// (drain.go); 0: no bound (idem.Config fills in its default).
	AttemptTimeout time.Duration
	TenantContext  func(ctx context.Context, tenant string) context.Context
	Caller         func(ctx context.Context) []byte
	CallerContext  func(ctx context.Context, tenant string, caller []byte) (context.Context, error)
}

// Engine is the runtime hook: the gqlgen handler extension that makes every
// mutation marked @idempotent in the schema retry-safe (idem.Hook.Handler
// installs it), and the recoverer.
type Engine struct {
	cfg    Config
	tel    *telemetry
	store  store.Driver
	schema *ast.Schema
	fields map[string]*fieldSpec // by Mutation field name
	// lookups shares a lookup of one key among concurrent requests.
	lookups flights[lookedUp]
	// inFlight queues identical requests of this process behind the first.
	inFlight inFlight
	// operations caches the queries of the operations that claims keep.
	operations operationShapes
	// finished remembers records seen finished, whose retries look first.
	finished finishedRecords

	recovery recovery // the recoverer's (recover.go)

	// attempts are the attempts that run, which Shutdown drains (drain.go).
	attempts attempts

	// shortLived are the mutations read by Validate whose retention is
	// shorter than their table's, for the sweeper (MutationRetentions),
	// which may run on another goroutine.
	shortLived atomic.Pointer[[]MutationRetention]
}

// MutationRetention is the retention of one @idempotent mutation,
// @idempotent(retentionSeconds:), shorter than its record table's.
type MutationRetention struct {
	// Field is the mutation as its records' fingerprints name it,
	// "<Mutation type>.<field>".
	Field string
	// Entity is its record entity.
	Entity    string
	Retention time.Duration
}

// MutationRetentions returns the mutations of the schema (read by
// Validate) whose retention is shorter than their record table's, by
// entity then field; read is false before Validate.
func (e *Engine) MutationRetentions() (_ []MutationRetention, read bool) {
	if p := e.shortLived.Load(); p != nil {
		return *p, true
	}
	return nil, false
}

// The modes of an idempotent mutation (@idempotent(mode:)).
const (
	modeLease  = directive.ModeLease
	modeAtomic = directive.ModeAtomic
)

// fieldSpec is what the hook knows of one idempotent mutation field.
type fieldSpec struct {
	name    string
	records *idembackend.RecordTable
	table   store.Table
	mode    string // modeLease or modeAtomic
	lease   time.Duration
	// retention is how long a finished record of the mutation replays:
	// @idempotent(retentionSeconds:), or its table's (tableRetention),
	// after which the sweeper archives the record (a sweeper that knows no
	// schema, after the table's).
	retention      time.Duration
	tableRetention time.Duration
	// leaveOut are the argument paths the fingerprint leaves out: the key,
	// and @idempotent(fingerprintExclude:).
	leaveOut []string
	pace     *pace // how long the mutation has recently been taking
	// keyOptional: @idempotent(keyRequired: false), during a rollout; a
	// call without a key runs without idempotency (keyless.go).
	keyOptional bool
	// recoverable: the claim keeps its operation, so that the recoverer
	// can run it again if its client never comes back.
	recoverable bool
	// neverBorn: a try born completed found that none of the field's can
	// succeed (born.go, neverBorn): its claims take the atomic path from
	// then on.
	neverBorn atomic.Bool
	tel       fieldTelemetry
}

var (
	_ graphql.HandlerExtension        = (*Engine)(nil)
	_ graphql.OperationContextMutator = keyHeaderCheck{}
	_ graphql.OperationContextMutator = (*Engine)(nil)
	_ graphql.ResponseInterceptor     = (*Engine)(nil)
	_ graphql.RootFieldInterceptor    = (*Engine)(nil)
	_ graphql.FieldInterceptor        = (*Engine)(nil)
)

// New returns the engine of cfg, which package idem has checked.
func New(cfg Config) (*Engine, error) {
	st, err := store.Open(cfg.Backend.Dialect(), cfg.Backend, store.Options{Offset: cfg.Offset})
	if err != nil {
		return nil, err
	}
	tel, err := newTelemetry(cfg.MeterProvider, cfg.TracerProvider)
	if err != nil {
		return nil, fmt.Errorf("idem: telemetry: %w", err)
	}
	return &Engine{cfg: cfg, tel: tel, store: st}, nil
}

// ExtensionName implements graphql.HandlerExtension.
func (e *Engine) ExtensionName() string { return "Idempotency" }

// Validate implements graphql.HandlerExtension: it reads the @idempotent
// mutations from the schema and checks that each has its key argument and a
// record table in the backend. gqlgen calls it from srv.Use.
func (e *Engine) Validate(es graphql.ExecutableSchema) error {
	schema := es.Schema()
	e.schema = schema
	fields := map[string]*fieldSpec{}
	if schema.Mutation != nil {
		for _, f := range schema.Mutation.Fields {
			d := f.Directives.ForName(directive.Name)
			if d == nil {
				continue
			}
			spec, err := e.fieldSpec(f, d)
			if err != nil {
				return fmt.Errorf("idem: %s.%s: %w", schema.Mutation.Name, f.Name, err)
			}
			fields[f.Name] = spec
		}
	}
	e.fields = fields
	e.tel.zero(context.Background(), fields)
	var short []MutationRetention
	for _, spec := range fields {
		if spec.retention < spec.tableRetention {
			short = append(short, MutationRetention{Field: schema.Mutation.Name + "." + spec.name, Entity: spec.records.Entity, Retention: spec.retention})
		}
	}
	slices.SortFunc(short, func(a, b MutationRetention) int {
		return cmp.Or(strings.Compare(a.Entity, b.Entity), strings.Compare(a.Field, b.Field))
	})
	e.shortLived.Store(&short)
	return nil
}

func (e *Engine) fieldSpec(f *ast.FieldDefinition, d *ast.Directive) (*fieldSpec, error) {
	if f.Arguments.ForName(directive.KeyArgument) == nil {
		return nil, fmt.Errorf("@%s needs an argument %s: String", directive.Name, directive.KeyArgument)
	}
	spec := &fieldSpec{name: f.Name, mode: modeLease, lease: e.cfg.Lease, pace: &pace{}, recoverable: true}
	entity := directive.DefaultRecordEntity
	if a := d.Arguments.ForName(directive.ArgRecord); a != nil && a.Value != nil && a.Value.Raw != "" {
		entity = a.Value.Raw
	}
	if a := d.Arguments.ForName(directive.ArgMode); a != nil && a.Value != nil {
		switch m := a.Value.Raw; m {
		case modeLease, modeAtomic:
			spec.mode = m
		default:
			return nil, fmt.Errorf("unknown mode %q", a.Value.Raw)
		}
	}
	if a := d.Arguments.ForName(directive.ArgLeaseSeconds); a != nil && a.Value != nil {
		n, err := strconv.Atoi(a.Value.Raw)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("leaseSeconds must be a positive integer, got %q", a.Value.Raw)
		}
		spec.lease = time.Duration(n) * time.Second
	}
	if a := d.Arguments.ForName(directive.ArgKeyRequired); a != nil && a.Value != nil {
		if spec.keyOptional = a.Value.Raw == "false"; spec.keyOptional && f.Arguments.ForName(directive.KeyArgument).Type.NonNull {
			return nil, fmt.Errorf("keyRequired: false needs the argument %s: String (nullable), or no call could omit it", directive.KeyArgument)
		}
	}
	if a := d.Arguments.ForName(directive.ArgRecover); a != nil && a.Value != nil {
		spec.recoverable = a.Value.Raw != "false"
	}
	spec.leaveOut = append([]string{directive.KeyArgument}, directive.FingerprintExclude(d)...)
	if err := fingerprint.CheckPaths(e.schema, f, spec.leaveOut[1:]); err != nil {
		return nil, fmt.Errorf("%s: %w", directive.ArgFingerprintExclude, err)
	}
	spec.tel = newFieldTelemetry(f.Name, spec.mode)
	recs, ok := e.cfg.Backend.Records(entity)
	if !ok {
		return nil, fmt.Errorf("record entity %q is not an ent type with the idemschema mixin", entity)
	}
	spec.records = recs
	spec.table = store.TableOf(recs)
	spec.tableRetention = store.RetentionOf(recs, e.cfg.Retention)
	spec.retention = spec.tableRetention
	if a := d.Arguments.ForName(directive.ArgRetentionSeconds); a != nil && a.Value != nil {
		n, err := strconv.Atoi(a.Value.Raw)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s must be a positive integer, got %q", directive.ArgRetentionSeconds, a.Value.Raw)
		}
		// A sweeper that knows no GraphQL schema (a standalone idemctl)
		// archives a table's records by the table's retention: a longer one
		// here would be archived before its end.
		if spec.retention = time.Duration(n) * time.Second; spec.retention > spec.tableRetention {
			return nil, fmt.Errorf("%s: %s (%s) exceeds the retention of its record entity %s (%s), after which the sweeper archives its records: "+
				"give %s idemschema.Retention(%s), or name a record entity of its own with that retention",
				directive.ArgRetentionSeconds, a.Value.Raw, humanDuration(spec.retention), entity, humanDuration(spec.tableRetention), entity, humanDuration(spec.retention))
		}
	}
	return spec, nil
}

// humanDuration writes d for people: 24h, 1h30m, 45s.
func humanDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// retentionOf is how long rec, a record of spec's table, replays: the
// retention of the mutation that made it (named in its fingerprint), or
// spec's when that mutation is gone or keeps its records elsewhere.
func (e *Engine) retentionOf(spec *fieldSpec, rec *record.Record) time.Duration {
	if rec == nil {
		return spec.retention
	}
	if fp, ok := fingerprint.Parse(rec.Fingerprint); ok && e.schema.Mutation != nil {
		name := strings.TrimPrefix(fp.Field, e.schema.Mutation.Name+".")
		if other := e.fields[name]; other != nil && other.table == spec.table {
			return other.retention
		}
	}
	return spec.retention
}

// MutateOperationContext implements graphql.OperationContextMutator: it
// checks the keys of a mutation's idempotent fields before anything runs.
// The Idempotency-Key header (with Config.KeyHeader) names the key of the
// operation's only idempotent field, and must agree with that field's
// argument if both are sent; and no two idempotent fields of one operation
// may name the same key, whatever their record entities: one key is one
// intent (all IDEMPOTENCY_KEY_INVALID). A malformed header refuses any
// operation, before this runs (KeyHeaderCheck).
func (e *Engine) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil || oc.Operation.Operation != ast.Mutation {
		return nil
	}
	var fields []*ast.Field
	for _, f := range graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{e.schema.Mutation.Name}) {
		if e.fields[f.Name] != nil {
			fields = append(fields, f.Field)
		}
	}
	if len(fields) == 0 {
		return nil
	}
	if st := reqstate.From(ctx); e.cfg.KeyHeader && st != nil && st.HasKey {
		refuse := func(format string, args ...any) *gqlerror.Error {
			return refusal.GQL(refusal.Errorf(idemcode.KeyInvalid, st.Key, format, args...))
		}
		if len(fields) > 1 {
			return refuse("the %s header can name the key of one idempotent field; this operation has %d: send an %s argument to each",
				idemcode.HeaderKey, len(fields), directive.KeyArgument)
		}
		if arg, present, err := keyArgument(oc, fields[0]); err == nil && present && arg != st.Key {
			return refuse("the %s header and the %s argument differ; send one key", idemcode.HeaderKey, directive.KeyArgument)
		}
		return nil
	}
	return sharedKey(oc, fields)
}

// KeyHeaderCheck is the extension that refuses any operation, queries
// included, whose Idempotency-Key header (with Config.KeyHeader) is
// malformed (IDEMPOTENCY_KEY_INVALID). Hook.Handler installs it ahead of
// the other checks of an operation, so that a malformed header is the
// refusal a request gets whatever else is wrong with it.
func (e *Engine) KeyHeaderCheck() graphql.HandlerExtension {
	return keyHeaderCheck{keyHeader: e.cfg.KeyHeader}
}

type keyHeaderCheck struct{ keyHeader bool }

func (keyHeaderCheck) ExtensionName() string                   { return "IdempotencyKeyHeader" }
func (keyHeaderCheck) Validate(graphql.ExecutableSchema) error { return nil }

func (c keyHeaderCheck) MutateOperationContext(ctx context.Context, _ *graphql.OperationContext) *gqlerror.Error {
	if st := reqstate.From(ctx); c.keyHeader && st != nil && st.HasKey && st.KeyErr != nil {
		var ie *idemcode.Error
		errors.As(st.KeyErr, &ie)
		return refusal.GQL(ie)
	}
	return nil
}

// sharedKey refuses an operation in which two idempotent fields name the
// same key. Run, the first would store its result and the second would be
// refused as a reuse, so that the operation could never be answered whole,
// and the key would be spent.
func sharedKey(oc *graphql.OperationContext, fields []*ast.Field) *gqlerror.Error {
	if len(fields) < 2 {
		return nil // the common operation: one field, nothing to share
	}
	seen := make(map[string]*ast.Field, len(fields))
	for _, f := range fields {
		key, present, err := keyArgument(oc, f)
		if err != nil || !present || idemkey.Validate(key) != nil {
			continue // refused on its own, with its own error
		}
		if first, ok := seen[key]; ok {
			return refusal.GQL(refusal.Errorf(idemcode.KeyInvalid, key,
				"the idempotency key of %s is also the key of %s: one key names one intent; send a new key to each field",
				responseName(f), responseName(first)))
		}
		seen[key] = f
	}
	return nil
}

func responseName(f *ast.Field) string {
	if f.Alias != "" {
		return f.Alias
	}
	return f.Name
}

// InterceptResponse implements graphql.ResponseInterceptor: it collects what
// happened to each idempotent field of the operation and reports it in the
// response's extensions.idempotency (and, through Middleware, in headers).
func (e *Engine) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	ctx, op := withOperation(ctx, reqstate.From(ctx))
	resp := next(ctx)
	if resp == nil || len(op.fields) == 0 {
		return resp
	}
	if resp.Extensions == nil {
		resp.Extensions = map[string]any{}
	}
	resp.Extensions["idempotency"] = op.fields
	op.report()
	return resp
}

// InterceptRootField implements graphql.RootFieldInterceptor: it runs the
// claim / replay protocol around each idempotent mutation field.
func (e *Engine) InterceptRootField(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	rfc := graphql.GetRootFieldContext(ctx)
	oc := graphql.GetOperationContext(ctx)
	if rfc == nil || oc == nil || oc.Operation == nil || oc.Operation.Operation != ast.Mutation {
		return next(ctx)
	}
	spec := e.fields[rfc.Field.Name]
	if spec == nil {
		return next(ctx)
	}
	return e.serve(ctx, spec, oc, rfc.Field, next)
}

// InterceptField implements graphql.FieldInterceptor. Inside an idempotent
// mutation it claims the key (where the typed arguments are known) and opens
// the transaction just before the resolver runs, and it watches every
// resolver error and panic of the field's tree to classify the outcome.
//
// It also runs the resolvers of the field's tree one at a time: they share
// the mutation's transaction, one database connection, and gqlgen resolves
// sibling fields concurrently. Two edges queried at once on one pgx
// connection fail ("conn busy") or corrupt it (a panic in its rows). A
// resolver returns before its children are resolved, so this cannot
// deadlock.
//
// A call without a key while the key is optional (keyless.go) gets the
// same: its transaction opened before the resolver, its tree one resolver
// at a time, its panics watched.
func (e *Engine) InterceptField(ctx context.Context, next graphql.Resolver) (any, error) {
	a := attemptFrom(ctx)
	if a == nil {
		if k := keylessFrom(ctx); k != nil {
			return k.interceptField(ctx, next)
		}
		return next(ctx)
	}
	if fc := graphql.GetFieldContext(ctx); fc != nil && a.isRoot(fc.Field.Field) && a.begun == nil {
		var err error
		if ctx, err = a.begin(ctx, fc.Args); err != nil {
			return nil, err
		}
	}
	a.oneAtATime.Lock()
	defer a.oneAtATime.Unlock()
	defer func() {
		if r := recover(); r != nil {
			a.observe(nil, true)
			panic(r)
		}
	}()
	res, err := next(ctx)
	if err != nil {
		a.observe(err, false)
	}
	return res, err
}
