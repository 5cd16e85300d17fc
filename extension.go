package idem

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem/idembackend"
	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/idemhttp"
	"github.com/goovo/idem/internal/directive"
	"github.com/goovo/idem/internal/document"
	"github.com/goovo/idem/internal/idemkey"
	"github.com/goovo/idem/internal/refusal"
	"github.com/goovo/idem/internal/reqstate"
	"github.com/goovo/idem/internal/store"
)

// Names in the GraphQL schema the hook reads.
const (
	// Directive marks a mutation as idempotent.
	Directive = directive.Name
	// KeyArgument is the mutation argument that carries the key.
	KeyArgument = directive.KeyArgument
	// InputArgument is the argument of a generated create mutation that
	// carries the entity's create input (entgql's Create<T>Input).
	InputArgument = directive.InputArgument
	// DefaultRecordEntity is the ent type that holds the records of
	// @idempotent mutations that name none (idemschema.Record).
	DefaultRecordEntity = directive.DefaultRecordEntity
)

// Extension is the runtime hook: a gqlgen handler extension that makes every
// mutation marked @idempotent in the schema retry-safe. Install it with
// Install, or with srv.Use(ext) and ext.Middleware for the HTTP headers.
type Extension struct {
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
}

// fieldSpec is what the hook knows of one idempotent mutation field.
type fieldSpec struct {
	name      string
	records   *idembackend.RecordTable
	table     store.Table
	mode      Mode
	lease     time.Duration
	retention time.Duration
	pace      *pace // how long the mutation has recently been taking
	// keyOptional: @idempotent(keyRequired: false), during a rollout; a
	// call without a key runs without idempotency (keyless.go).
	keyOptional bool
	// recoverable: the claim keeps its operation, so that the recoverer
	// can run it again if its client never comes back.
	recoverable bool
	tel         fieldTelemetry
}

var (
	_ graphql.HandlerExtension        = (*Extension)(nil)
	_ graphql.OperationContextMutator = (*Extension)(nil)
	_ graphql.ResponseInterceptor     = (*Extension)(nil)
	_ graphql.RootFieldInterceptor    = (*Extension)(nil)
	_ graphql.FieldInterceptor        = (*Extension)(nil)
)

// New returns the hook for cfg. Errors name the Config field at fault.
func New(cfg Config) (*Extension, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := openStore(cfg)
	if err != nil {
		return nil, err
	}
	tel, err := newTelemetry(cfg.MeterProvider, cfg.TracerProvider)
	if err != nil {
		return nil, fmt.Errorf("idem: telemetry: %w", err)
	}
	return &Extension{cfg: cfg, tel: tel, store: st}, nil
}

// ExtensionName implements graphql.HandlerExtension.
func (e *Extension) ExtensionName() string { return "Idempotency" }

// Validate implements graphql.HandlerExtension: it reads the @idempotent
// mutations from the schema and checks that each has its key argument and a
// record table in the backend. gqlgen calls it from srv.Use.
func (e *Extension) Validate(es graphql.ExecutableSchema) error {
	schema := es.Schema()
	fields := map[string]*fieldSpec{}
	if schema.Mutation != nil {
		for _, f := range schema.Mutation.Fields {
			d := f.Directives.ForName(Directive)
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
	e.schema, e.fields = schema, fields
	return nil
}

func (e *Extension) fieldSpec(f *ast.FieldDefinition, d *ast.Directive) (*fieldSpec, error) {
	if f.Arguments.ForName(KeyArgument) == nil {
		return nil, fmt.Errorf("@%s needs an argument %s: String", Directive, KeyArgument)
	}
	spec := &fieldSpec{name: f.Name, mode: ModeLease, lease: e.cfg.Lease, pace: &pace{}, recoverable: true}
	entity := DefaultRecordEntity
	if a := d.Arguments.ForName(directive.ArgRecord); a != nil && a.Value != nil && a.Value.Raw != "" {
		entity = a.Value.Raw
	}
	if a := d.Arguments.ForName(directive.ArgMode); a != nil && a.Value != nil {
		switch m := Mode(a.Value.Raw); m {
		case ModeLease, ModeAtomic:
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
		if spec.keyOptional = a.Value.Raw == "false"; spec.keyOptional && f.Arguments.ForName(KeyArgument).Type.NonNull {
			return nil, fmt.Errorf("keyRequired: false needs the argument %s: String (nullable), or no call could omit it", KeyArgument)
		}
	}
	if a := d.Arguments.ForName(directive.ArgRecover); a != nil && a.Value != nil {
		spec.recoverable = a.Value.Raw != "false"
	}
	spec.tel = newFieldTelemetry(f.Name, spec.mode)
	recs, ok := e.cfg.Backend.Records(entity)
	if !ok {
		return nil, fmt.Errorf("record entity %q is not an ent type with the idemschema mixin", entity)
	}
	spec.records = recs
	spec.table = storeTable(recs)
	spec.retention = e.cfg.retention(recs)
	return spec, nil
}

// MutateOperationContext implements graphql.OperationContextMutator: it
// checks the operation's text and keys before anything runs. Text the
// database cannot store (a NUL character or bytes that are not UTF-8, in
// a variable, a literal argument or a JSON body) refuses any operation,
// on every backend alike (BAD_USER_INPUT; see text.go). A malformed
// Idempotency-Key header (with Config.KeyHeader) refuses any operation; the
// header names the key of the operation's only idempotent field, and must
// agree with that field's argument if both are sent; and no two idempotent
// fields of one operation may name the same key, whatever their record
// entities: one key is one intent (all IDEMPOTENCY_KEY_INVALID).
func (e *Extension) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	st := reqstate.From(ctx)
	header := e.cfg.KeyHeader && st != nil && st.HasKey
	if header && st.KeyErr != nil {
		var ie *idemcode.Error
		errors.As(st.KeyErr, &ie)
		return refusal.GQL(ie)
	}
	if st != nil && st.Body != nil && st.Body.Invalid() {
		return document.BodyNotUTF8()
	}
	if err := document.Arguments(oc); err != nil {
		return err
	}
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
	if header {
		refuse := func(format string, args ...any) *gqlerror.Error {
			return refusal.GQL(refusal.Errorf(CodeKeyInvalid, st.Key, format, args...))
		}
		if len(fields) > 1 {
			return refuse("the %s header can name the key of one idempotent field; this operation has %d: send an %s argument to each",
				idemhttp.HeaderKey, len(fields), KeyArgument)
		}
		if arg, present, err := keyArgument(oc, fields[0]); err == nil && present && arg != st.Key {
			return refuse("the %s header and the %s argument differ; send one key", idemhttp.HeaderKey, KeyArgument)
		}
		return nil
	}
	return sharedKey(oc, fields)
}

// sharedKey refuses an operation in which two idempotent fields name the
// same key. Run, the first would store its result and the second would be
// refused as a reuse, so that the operation could never be answered whole,
// and the key would be spent.
func sharedKey(oc *graphql.OperationContext, fields []*ast.Field) *gqlerror.Error {
	seen := make(map[string]*ast.Field, len(fields))
	for _, f := range fields {
		key, present, err := keyArgument(oc, f)
		if err != nil || !present || idemkey.Validate(key) != nil {
			continue // refused on its own, with its own error
		}
		if first, ok := seen[key]; ok {
			return refusal.GQL(refusal.Errorf(CodeKeyInvalid, key,
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
//
// An answer without data and with more than maxRequestErrors errors (a
// document that breaks a validation rule thousands of times: each repeated
// directive, each unused variable is an error) keeps the first of them and
// says how many more there were, as graphql-js stops at 100.
func (e *Extension) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	op := &operation{http: reqstate.From(ctx)}
	resp := next(context.WithValue(ctx, operationKey{}, op))
	if resp != nil && len(resp.Data) == 0 && len(resp.Errors) > maxRequestErrors {
		more := len(resp.Errors) - maxRequestErrors
		last := resp.Errors[maxRequestErrors-1]
		resp.Errors = append(resp.Errors[:maxRequestErrors:maxRequestErrors], &gqlerror.Error{
			Message:    fmt.Sprintf("%d more errors not shown", more),
			Extensions: map[string]any{"code": last.Extensions["code"]},
		})
	}
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

// maxRequestErrors is how many errors an answer without data shows.
const maxRequestErrors = 100

// InterceptRootField implements graphql.RootFieldInterceptor: it runs the
// claim / replay protocol around each idempotent mutation field.
func (e *Extension) InterceptRootField(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
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
func (e *Extension) InterceptField(ctx context.Context, next graphql.Resolver) (any, error) {
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
