package idemschema_test

import (
	"testing"

	"entgo.io/ent/schema/field"

	"github.com/goovo/idem/idemschema"
)

func TestMixinFields(t *testing.T) {
	fields := map[string]*field.Descriptor{}
	for _, f := range (idemschema.Mixin{}).Fields() {
		d := f.Descriptor()
		fields[d.Name] = d
	}
	for name, want := range map[string]struct {
		typ       field.Type
		optional  bool
		immutable bool
	}{
		"tenant_id":                    {field.TypeString, false, true},
		"idempotency_key":              {field.TypeString, true, true},
		"idempotency_status":           {field.TypeEnum, true, false},
		"idempotency_fingerprint":      {field.TypeString, true, true},
		"idempotency_response":         {field.TypeBytes, true, false},
		"idempotency_attempt":          {field.TypeInt, false, false},
		"idempotency_lease_expires_at": {field.TypeTime, true, false},
		"idempotency_claimed_at":       {field.TypeTime, true, true},
		"idempotency_completed_at":     {field.TypeTime, true, false},
		"idempotency_archived_at":      {field.TypeTime, true, false},
		"idempotency_operation":        {field.TypeBytes, true, true},
	} {
		d, ok := fields[name]
		if !ok {
			t.Errorf("missing field %s", name)
			continue
		}
		if d.Info.Type != want.typ || d.Optional != want.optional || d.Immutable != want.immutable {
			t.Errorf("%s: type %v optional %v immutable %v, want %v %v %v",
				name, d.Info.Type, d.Optional, d.Immutable, want.typ, want.optional, want.immutable)
		}
	}
	if len(fields) != 11 {
		t.Errorf("%d fields, want 11", len(fields))
	}
	// Keys are at most 255 bytes, as the hook enforces.
	if err := fields["idempotency_key"].Validators[0].(func(string) error)(string(make([]byte, 256))); err == nil {
		t.Error("a 256-byte key passes the field's validator")
	}
	status := fields["idempotency_status"]
	var values []string
	for _, e := range status.Enums {
		values = append(values, e.V)
	}
	if got := len(values); got != 3 || values[0] != "pending" || values[1] != "succeeded" || values[2] != "failed" {
		t.Errorf("status values %v", values)
	}
}

func TestMixinReusesAScopeField(t *testing.T) {
	m := idemschema.Mixin{Scope: "org_id"}
	for _, f := range m.Fields() {
		if f.Descriptor().Name == "tenant_id" {
			t.Fatal("mixin with Scope adds tenant_id")
		}
	}
	idx := m.Indexes()[0].Descriptor()
	if !idx.Unique || len(idx.Fields) != 2 || idx.Fields[0] != "org_id" || idx.Fields[1] != "idempotency_key" {
		t.Fatalf("unique index %+v, want (org_id, idempotency_key)", idx)
	}
	ant := m.Annotations()[0].(idemschema.Annotation)
	if ant.ScopeField != "org_id" {
		t.Fatalf("annotation scope %q", ant.ScopeField)
	}
}

func TestAnnotationsMerge(t *testing.T) {
	a := idemschema.Mixin{}.Annotations()[0].(idemschema.Annotation)
	merged := a.Merge(idemschema.Atomic()).(idemschema.Annotation).
		Merge(idemschema.Lease(90_000_000_000)).(idemschema.Annotation)
	if merged.ScopeField != "tenant_id" || merged.Mode != "ATOMIC" || merged.LeaseSeconds != 90 || merged.NoCreate {
		t.Fatalf("merged %+v", merged)
	}
	if !merged.Merge(idemschema.NoCreateMutation()).(idemschema.Annotation).NoCreate {
		t.Fatal("NoCreateMutation lost in merge")
	}
	if merged.NoRecover || !merged.Merge(idemschema.NoRecover()).(idemschema.Annotation).Merge(idemschema.Atomic()).(idemschema.Annotation).NoRecover {
		t.Fatal("NoRecover lost in merge")
	}
}
