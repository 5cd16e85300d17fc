package pgxdriver

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// RegisterUUID makes conn send github.com/google/uuid values (uuid.UUID,
// and *uuid.UUID, which ent passes for UUID ids) to uuid parameters as
// their sixteen bytes. Without it pgx finds no plan for them but their
// driver.Valuer, whose string its binary encoding refuses: it formats an
// error, then sends the string as text, about twenty allocations per
// argument on every insert of an entity with a UUID id.
// (github.com/vgarvardt/pgx-google-uuid covers uuid.UUID but not the
// pointer, which pgx will not dereference because it is a driver.Valuer.)
// Parameters of other types are left to pgx's plans, as before.
func RegisterUUID(conn *pgx.Conn) {
	tm := conn.TypeMap()
	tm.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapUUID}, tm.TryWrapEncodePlanFuncs...)
}

// uuidValue is a uuid as pgx's UUIDCodec takes it (pgtype.UUIDValuer).
type uuidValue pgtype.UUID

func (u uuidValue) UUIDValue() (pgtype.UUID, error) { return pgtype.UUID(u), nil }

func tryWrapUUID(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	switch value.(type) {
	case uuid.UUID, *uuid.UUID:
		return &uuidPlan{}, uuidValue{}, true
	}
	return nil, nil, false
}

// uuidPlan hands a uuid.UUID or *uuid.UUID to the next plan as a
// uuidValue (a nil pointer as NULL).
type uuidPlan struct{ next pgtype.EncodePlan }

func (p *uuidPlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidPlan) Encode(value any, buf []byte) ([]byte, error) {
	var v uuidValue
	switch id := value.(type) {
	case uuid.UUID:
		v = uuidValue{Bytes: id, Valid: true}
	case *uuid.UUID:
		if id != nil {
			v = uuidValue{Bytes: *id, Valid: true}
		}
	}
	return p.next.Encode(v, buf)
}
