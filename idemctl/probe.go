package idemctl

import (
	"context"
	"fmt"
	"time"

	"github.com/goovo/idem/internal/store"
)

// CheckClaimTables asks every record table a question that reads no row:
// its claims whose lease ended before 1970, through the partial index on
// pending claims that the recoverer uses. It returns nil when each table
// answers, and otherwise an error naming the first table that did not
// (missing, renamed, locked past ctx, the database down). It is the claim
// tables' readiness check (idemhttp.ReadinessCheck).
func (a *Admin) CheckClaimTables(ctx context.Context) error {
	for _, recs := range a.cfg.Backend.RecordTables() {
		if _, err := a.store.PurgeAbandoned(ctx, store.AbandonedBatch{Table: store.TableOf(recs), LeaseEndedBefore: time.Unix(0, 0), DryRun: true}); err != nil {
			return fmt.Errorf("idem: record table %s: %w", recs.Table, err)
		}
	}
	return nil
}
