// Package directive names what an application's GraphQL schema tells the
// runtime hook about its idempotent mutations: the @idempotent directive,
// its arguments and the key argument. idemgen writes these names into the
// schema and the hook reads them back; both take them from this leaf
// package, so that the generator does not link the hook's runtime.
package directive

import "github.com/vektah/gqlparser/v2/ast"

// Names in the GraphQL schema.
const (
	// Name of the directive that marks a mutation idempotent.
	Name = "idempotent"
	// KeyArgument is the mutation argument that carries the key.
	KeyArgument = "idempotencyKey"
	// InputArgument is the argument of a create mutation that carries the
	// entity's create input (entgql's Create<T>Input).
	InputArgument = "input"
	// DefaultRecordEntity is the ent type that holds the records of
	// @idempotent mutations that name none (idemschema.Record).
	DefaultRecordEntity = "IdempotencyRecord"
	// ModeEnum is the GraphQL enum of the mode argument.
	ModeEnum = "IdempotencyMode"
)

// Arguments of the directive.
const (
	// ArgRecord names the ent type whose table holds the records.
	ArgRecord = "record"
	// ArgMode is LEASE (the default) or ATOMIC.
	ArgMode = "mode"
	// ArgLeaseSeconds overrides the hook's lease.
	ArgLeaseSeconds = "leaseSeconds"
	// ArgKeyRequired, false during a rollout, lets a call without a key
	// run as the mutation did before it was idempotent.
	ArgKeyRequired = "keyRequired"
	// ArgRecover, false for a mutation that must not run without a live
	// client, keeps the recoverer from running its abandoned claims again:
	// they wait for their client, then are stored as abandoned.
	ArgRecover = "recover"
	// ArgFingerprintExclude lists argument paths ("input.clientTime") that
	// do not count in the fingerprint: a retry that changes only them
	// replays the first result instead of being refused as a reuse.
	ArgFingerprintExclude = "fingerprintExclude"
	// ArgRetentionSeconds shortens the replay window of the mutation's
	// records below their record entity's retention; the sweeper of a hook
	// that read the schema archives them by it.
	ArgRetentionSeconds = "retentionSeconds"
)

// Values of ModeEnum.
const (
	ModeLease  = "LEASE"
	ModeAtomic = "ATOMIC"
)

// FingerprintExclude returns the paths of an @idempotent directive's
// fingerprintExclude argument (a list of strings, or one string, which
// GraphQL reads as a list of one).
func FingerprintExclude(d *ast.Directive) []string {
	a := d.Arguments.ForName(ArgFingerprintExclude)
	if a == nil || a.Value == nil {
		return nil
	}
	if a.Value.Kind == ast.StringValue {
		return []string{a.Value.Raw}
	}
	var paths []string
	for _, c := range a.Value.Children {
		if c.Value != nil {
			paths = append(paths, c.Value.Raw)
		}
	}
	return paths
}
