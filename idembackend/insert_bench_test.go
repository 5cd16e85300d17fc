package idembackend_test

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/sqlgraph"
	"entgo.io/ent/schema/field"

	"github.com/goovo/idem/idembackend"
)

// BenchmarkClaimStatement measures what a claim's INSERT costs the process
// besides its round trip: ent's sqlgraph.CreateNode, which builds the
// statement for every row (what the generated claim called before), and
// ClaimInsert.Create, which builds it once per table. The spec is the
// test application's shipment claim (eleven columns and the id); the
// driver answers every query with one id from memory, so the database's
// time is not in it and what is measured is the library's own work:
// building, arguments, reading the id back.
func BenchmarkClaimStatement(b *testing.B) {
	ctx := context.Background()
	drv := &answerDriver{dialect: dialect.Postgres}
	conflict := []string{"org", "idempotency_key"}
	now := time.Now()
	spec := func() *sqlgraph.CreateSpec {
		s := sqlgraph.NewCreateSpec("shipments", sqlgraph.NewFieldSpec("id", field.TypeInt))
		s.SetField("idempotency_key", field.TypeString, "key")
		s.SetField("idempotency_status", field.TypeEnum, "pending")
		s.SetField("idempotency_fingerprint", field.TypeString, "v1:createShipmentAtomic:0123456789abcdef")
		s.SetField("idempotency_attempt", field.TypeInt, 1)
		s.SetField("idempotency_lease_expires_at", field.TypeTime, now)
		s.SetField("idempotency_claimed_at", field.TypeTime, now)
		s.SetField("created_at", field.TypeTime, now)
		s.SetField("org", field.TypeString, "bench")
		s.SetField("destination", field.TypeString, "Lyon")
		s.SetField("weight_grams", field.TypeInt, 900)
		return s
	}
	b.Run("sqlgraph", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s := spec()
			s.OnConflict = []sql.ConflictOption{sql.ConflictColumns(conflict...), sql.DoNothing()}
			if err := sqlgraph.CreateNode(ctx, drv, s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ClaimInsert", func(b *testing.B) {
		ins := &idembackend.ClaimInsert{Conflict: conflict}
		b.ReportAllocs()
		for b.Loop() {
			if err := ins.Create(ctx, drv, spec()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// answerDriver is an ent driver whose every query returns one row of one
// column, the id 1, without a database: for measuring what surrounds a
// query, never for testing what a database does.
type answerDriver struct{ dialect string }

func (d *answerDriver) Exec(context.Context, string, any, any) error {
	return errors.New("answerDriver: Exec")
}

func (d *answerDriver) Query(_ context.Context, _ string, _ any, v any) error {
	rows, ok := v.(*sql.Rows)
	if !ok {
		return fmt.Errorf("answerDriver: Query into %T", v)
	}
	*rows = sql.Rows{ColumnScanner: &oneID{}}
	return nil
}

func (d *answerDriver) Tx(context.Context) (dialect.Tx, error) {
	return nil, errors.New("answerDriver: Tx")
}
func (d *answerDriver) Close() error    { return nil }
func (d *answerDriver) Dialect() string { return d.dialect }

// oneID is a result of one row, one column "id", the value 1.
type oneID struct{ read bool }

func (r *oneID) Close() error                               { return nil }
func (r *oneID) ColumnTypes() ([]*stdsql.ColumnType, error) { return nil, nil }
func (r *oneID) Columns() ([]string, error)                 { return []string{"id"}, nil }
func (r *oneID) Err() error                                 { return nil }
func (r *oneID) NextResultSet() bool                        { return false }

func (r *oneID) Next() bool {
	if r.read {
		return false
	}
	r.read = true
	return true
}

func (r *oneID) Scan(dest ...any) error {
	switch d := dest[0].(type) {
	case *int64:
		*d = 1
	case *any:
		*d = int64(1)
	default:
		return fmt.Errorf("oneID: scan into %T", dest[0])
	}
	return nil
}
