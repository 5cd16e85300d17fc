package pgxdriver_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A driver's connections send github.com/google/uuid values, and pointers
// to them as ent passes ids, in binary (RegisterUUID), a nil pointer as
// NULL, and still send them as text where the parameter is text; a pool
// configuration's own AfterConnect still runs.
func TestUUIDArguments(t *testing.T) {
	var called bool
	e := newEnv(t, func(cfg *pgxpool.Config) {
		cfg.AfterConnect = func(context.Context, *pgx.Conn) error {
			called = true
			return nil
		}
	})
	ctx := context.Background()
	id := uuid.New()
	var asUUID, asPointer, asText string
	var isNull bool
	must(t, e.drv.Pool().QueryRow(ctx, `SELECT $1::uuid::text, $2::uuid::text, $3::text, $4::uuid IS NULL`, id, &id, id, (*uuid.UUID)(nil)).Scan(&asUUID, &asPointer, &asText, &isNull))
	if asUUID != id.String() || asPointer != id.String() || asText != id.String() || !isNull {
		t.Fatalf("uuid parameter %q, pointer %q, text parameter %q, nil pointer NULL %v; want %q", asUUID, asPointer, asText, isNull, id)
	}
	if !called {
		t.Fatal("the configuration's AfterConnect did not run")
	}
	// As cheap as the bytes themselves: pgx's fallback (the binary plan
	// fails on the value's driver.Valuer string, the text plan formats it)
	// costs some twenty allocations more.
	conn, err := e.drv.Pool().Acquire(ctx)
	must(t, err)
	defer conn.Release()
	allocs := func(arg any) float64 {
		return testing.AllocsPerRun(50, func() {
			if _, err := conn.Exec(ctx, `SELECT $1::uuid`, arg); err != nil {
				t.Fatal(err)
			}
		})
	}
	asBytes := allocs([16]byte(id))
	if n := allocs(id); n > asBytes+2 {
		t.Fatalf("a uuid.UUID argument costs %.0f allocations, its bytes %.0f", n, asBytes)
	}
	if n := allocs(&id); n > asBytes+2 {
		t.Fatalf("a *uuid.UUID argument costs %.0f allocations, its bytes %.0f", n, asBytes)
	}
}
