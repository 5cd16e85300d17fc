package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/mysql"
	"ariga.io/atlas/sql/postgres"
	atlas "ariga.io/atlas/sql/schema"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/goovo/idem/idemdb"
)

// operatorVersion is recorded with every revision this command writes.
const operatorVersion = "idem cmd/migrate"

// driver is what up and status need of Atlas's driver: migrations, and a
// lock that serialises concurrent ups.
type driver interface {
	migrate.Driver
	atlas.Locker
}

// pgDriver is Atlas's PostgreSQL driver scoped to the connection's current
// schema (the first existing schema of search_path): a database whose other
// schemas have tables is still "clean" if this one is empty. (Atlas's MySQL
// driver is scoped to the connection's database already.)
type pgDriver struct{ *postgres.Driver }

// openPostgresDriver opens Atlas's PostgreSQL driver on conn, scoped to
// its current schema.
func openPostgresDriver(conn atlas.ExecQuerier) (driver, error) {
	drv, err := postgres.Open(conn)
	if err != nil {
		return nil, err
	}
	return &pgDriver{drv.(*postgres.Driver)}, nil
}

// openMySQLDriver opens Atlas's MySQL driver on conn, scoped to its
// database.
func openMySQLDriver(conn atlas.ExecQuerier) (driver, error) {
	drv, err := mysql.Open(conn)
	if err != nil {
		return nil, err
	}
	return drv.(*mysql.Driver), nil
}

// CheckClean implements migrate.CleanChecker for the current schema only.
func (d *pgDriver) CheckClean(ctx context.Context, revT *migrate.TableIdent) error {
	s, err := d.InspectSchema(ctx, "", nil)
	if err != nil {
		return err
	}
	for _, t := range s.Tables {
		if revT == nil || t.Name != revT.Name {
			return &migrate.NotCleanError{State: atlas.NewRealm(s), Reason: fmt.Sprintf("found table %q in schema %q", t.Name, s.Name)}
		}
	}
	return nil
}

// target is the database that up and status work on: a PostgreSQL schema
// (the current one of its search_path) or a MySQL database.
type target struct {
	fl     *flavor
	db     *sql.DB
	drv    driver
	schema string
}

// openTarget opens DATABASE_URL, of the flavor fl.
func openTarget(ctx context.Context, fl *flavor, dsn string) (*target, error) {
	driverName, source, _ := idemdb.Resolve(dsn)
	db, err := sql.Open(driverName, source)
	if err != nil {
		return nil, err
	}
	t := &target{fl: fl, db: db}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("DATABASE_URL %s is unreachable: %w", redact(dsn), err)
	}
	var schema sql.NullString
	if err := db.QueryRowContext(ctx, fl.currentSchema).Scan(&schema); err != nil {
		db.Close()
		return nil, err
	}
	if !schema.Valid {
		db.Close()
		return nil, fmt.Errorf("DATABASE_URL %s: no schema of its search_path exists: create it first", redact(dsn))
	}
	t.schema = schema.String
	if t.drv, err = fl.openDriver(db); err != nil {
		db.Close()
		return nil, err
	}
	return t, nil
}

func (t *target) Close() error { return t.db.Close() }

// revisions reads and writes the target's revisions table.
func (t *target) revisions() revisions { return revisions{t.db, t.fl.sql} }

type upOptions struct {
	baseline    string
	lockTimeout time.Duration
	verbose     bool
}

// cmdUp applies the pending migrations of dir to the target, each file in a
// transaction of its own (unless it says -- atlas:txmode none, or the
// database is MySQL), recording every file in the revisions table.
func cmdUp(ctx context.Context, out io.Writer, t *target, dir migrate.Dir, dirName string, opt upOptions) error {
	if err := validateDir(t.fl, dir, dirName); err != nil {
		return fmt.Errorf("refusing to migrate: %w", err)
	}
	unlock, err := t.drv.Lock(ctx, "idem-migrate:"+t.schema, opt.lockTimeout)
	if errors.Is(err, atlas.ErrLocked) {
		return fmt.Errorf("another migrate up holds the lock on schema %q (waited %v): try again when it is done", t.schema, opt.lockTimeout)
	}
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer unlock()
	if err := t.revisions().ensureTable(ctx); err != nil {
		return err
	}
	rrw := t.revisions()
	revs, err := rrw.ReadRevisions(ctx)
	if err != nil {
		return fmt.Errorf("read %s: %w", RevisionsTable, err)
	}
	if n := len(revs); n > 0 && dirty(revs[n-1]) {
		last := revs[n-1]
		fmt.Fprintf(out, "the last run failed: version %s (%s) on %s, after %d of %d statements: %s\n",
			last.Version, last.Description, last.ExecutedAt.UTC().Format(time.RFC3339), last.Applied, last.Total, oneLine(last.Error))
		files, err := dir.Files()
		if err != nil {
			return err
		}
		inDir := slices.ContainsFunc(files, func(f migrate.File) bool { return f.Version() == last.Version })
		switch {
		case inDir:
			fmt.Fprintln(out, "retrying it")
		case last.Applied == 0:
			// Nothing of it is applied and the file is gone (withdrawn
			// before it ever succeeded): forget the failure.
			if err := rrw.DeleteRevision(ctx, last.Version); err != nil {
				return err
			}
			fmt.Fprintf(out, "forgetting it: none of its statements is applied and %s no longer has it\n", dirName)
		}
	}
	logger := &stmtLogger{out: out, verbose: opt.verbose}
	exOpts := []migrate.ExecutorOption{migrate.WithOperatorVersion(operatorVersion), migrate.WithLogger(logger)}
	if opt.baseline != "" {
		exOpts = append(exOpts, migrate.WithBaselineVersion(opt.baseline))
	}
	ex, err := migrate.NewExecutor(t.drv, dir, rrw, exOpts...)
	if err != nil {
		return err
	}
	pending, err := ex.Pending(ctx)
	if opt.baseline != "" && (err == nil || errors.Is(err, migrate.ErrNoPendingFiles)) {
		if len(revs) == 0 {
			fmt.Fprintf(out, "baseline: version %s and older recorded as applied, not run\n", opt.baseline)
		} else {
			fmt.Fprintf(out, "-baseline ignored: schema %q already has a migration history\n", t.schema)
		}
	}
	var (
		notClean  *migrate.NotCleanError
		nonLinear *migrate.HistoryNonLinearError
		missing   *migrate.MissingMigrationError
	)
	switch {
	case errors.Is(err, migrate.ErrNoPendingFiles):
		fmt.Fprintf(out, "no pending migrations: schema %q is at version %s\n", t.schema, currentVersion(ctx, rrw))
		return nil
	case errors.As(err, &notClean):
		return fmt.Errorf("schema %q has no migration history but is not empty (%s).\n"+
			"If its tables were created by ent's automatic migration (the server's Schema.Create) and match migration V,\n"+
			"mark V as applied without running it, then apply the rest:  migrate up -baseline V\n"+
			"(migrate status lists the versions)", t.schema, notClean.Reason)
	case errors.As(err, &nonLinear):
		return fmt.Errorf("%v: a migration with a version older than the last applied one was added (probably by a merge).\n"+
			"Give it a new version (delete it and run migrate diff again, or rename it and run migrate hash) before it runs anywhere", err)
	case errors.As(err, &missing):
		return fmt.Errorf("%v: the database is dirty at a version this binary does not have: run the migrate binary that ran it", err)
	case err != nil:
		return err
	}
	for _, f := range pending {
		if err := applyFile(ctx, out, t, dir, ex, logger, f); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "applied %d migration(s): schema %q is at version %s\n", len(pending), t.schema, currentVersion(ctx, rrw))
	return nil
}

// applyFile runs one migration file.
func applyFile(ctx context.Context, out io.Writer, t *target, dir migrate.Dir, ex *migrate.Executor, logger *stmtLogger, f migrate.File) error {
	stmts, err := migrate.FileStmtDecls(t.drv, f)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	txmode := "file"
	if lf, ok := f.(*migrate.LocalFile); ok {
		if ds := lf.Directive("txmode"); len(ds) > 0 {
			txmode = ds[0]
		}
	}
	if !t.fl.transactional {
		// MySQL commits before and after every DDL statement: a
		// transaction would hold nothing. Statement by statement, each
		// recorded, is what a file there can be.
		txmode = "none"
	}
	fmt.Fprintf(out, "applying %s (%d statements)\n", f.Name(), len(stmts))
	start := time.Now()
	switch txmode {
	case "none":
		// Statement by statement, each recorded as it succeeds: a failure
		// leaves the file partially applied, and the next up resumes it.
		if err := ex.Execute(ctx, f); err != nil {
			return failed(ctx, out, t, f, stmts, err, false)
		}
	case "file":
		tx, err := t.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		txDrv, err := t.fl.openDriver(tx)
		if err != nil {
			tx.Rollback()
			return err
		}
		txEx, err := migrate.NewExecutor(txDrv, dir, revisions{tx, t.fl.sql},
			migrate.WithOperatorVersion(operatorVersion), migrate.WithLogger(logger))
		if err != nil {
			tx.Rollback()
			return err
		}
		if err := txEx.Execute(ctx, f); err != nil {
			tx.Rollback()
			if rerr := recordFailure(ctx, t, dir, f, stmts, err); rerr != nil {
				err = errors.Join(err, fmt.Errorf("recording the failure in %s: %w", RevisionsTable, rerr))
			}
			return failed(ctx, out, t, f, stmts, err, true)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("%s: commit: %w", f.Name(), err)
		}
	default:
		return fmt.Errorf("%s: unsupported directive atlas:txmode %s (use file, the default, or none)", f.Name(), txmode)
	}
	fmt.Fprintf(out, "  ok in %v\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// recordFailure writes the revision of a file whose transaction rolled back,
// so that status shows what failed: nothing of the file is applied.
func recordFailure(ctx context.Context, t *target, dir migrate.Dir, f migrate.File, stmts []*migrate.Stmt, execErr error) error {
	rrw := t.revisions()
	rev, err := rrw.ReadRevision(ctx, f.Version())
	switch {
	case errors.Is(err, migrate.ErrRevisionNotExist):
		sum, err := dir.Checksum()
		if err != nil {
			return err
		}
		hash, err := sum.SumByName(f.Name())
		if err != nil {
			return err
		}
		rev = &migrate.Revision{Version: f.Version(), Description: f.Desc(), Type: migrate.RevisionTypeExecute, Hash: hash}
	case err != nil:
		return err
	}
	rev.Total = len(stmts)
	rev.ExecutedAt, rev.ExecutionTime = time.Now(), 0
	rev.OperatorVersion = operatorVersion
	rev.Error, rev.ErrorStmt = errorText(execErr), ""
	var serr *migrate.StmtExecError
	if errors.As(execErr, &serr) {
		rev.ErrorStmt = serr.Stmt.Text
	}
	return rrw.WriteRevision(ctx, rev)
}

// failed explains a failed file: which statement, why, and in which state
// the database is.
func failed(ctx context.Context, out io.Writer, t *target, f migrate.File, stmts []*migrate.Stmt, err error, inTx bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "migration %s failed", f.Name())
	var serr *migrate.StmtExecError
	if errors.As(err, &serr) {
		n := slices.IndexFunc(stmts, func(s *migrate.Stmt) bool { return s.Pos == serr.Stmt.Pos })
		fmt.Fprintf(&b, " at statement %d of %d:\n%s\n  %s", n+1, len(stmts), indent(serr.Stmt.Text), errorText(serr.Err))
	} else {
		fmt.Fprintf(&b, ": %v", err)
	}
	rev, rerr := t.revisions().ReadRevision(ctx, f.Version())
	switch {
	case inTx:
		fmt.Fprintf(&b, "\nThe file ran in one transaction, which was rolled back: none of its statements is applied;\n"+
			"schema %q is still at version %s. The failure is recorded (migrate status shows it).\n"+
			"Fix the cause and run migrate up again: it retries the file from its first statement.",
			t.schema, currentVersion(ctx, t.revisions()))
	case rerr == nil && rev.Applied > 0:
		fmt.Fprintf(&b, "\nDIRTY: the file runs without a transaction (atlas:txmode none; always on MySQL, whose DDL commits by itself) and %d of its %d statements stay applied.\n"+
			"Fix the cause and run migrate up again: it resumes at statement %d (the applied statements must not change).",
			rev.Applied, rev.Total, rev.Applied+1)
	default:
		b.WriteString("\nNo statement of the file was applied. Fix the cause and run migrate up again.")
	}
	return errors.New(b.String())
}

// errorText is the database's message of err, with its SQLSTATE.
func errorText(err error) string {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return fmt.Sprintf("%s: %s (SQLSTATE %s)", pg.Severity, pg.Message, pg.Code)
	}
	var serr *migrate.StmtExecError
	if errors.As(err, &serr) {
		return serr.Err.Error()
	}
	return err.Error()
}

// currentVersion is the last fully applied version, or "none".
func currentVersion(ctx context.Context, rrw revisions) string {
	revs, err := rrw.ReadRevisions(ctx)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for i := len(revs) - 1; i >= 0; i-- {
		if !dirty(revs[i]) {
			return revs[i].Version
		}
	}
	return "none (empty)"
}

// stmtLogger prints each statement with -v.
type stmtLogger struct {
	out     io.Writer
	verbose bool
}

func (l *stmtLogger) Log(e migrate.LogEntry) {
	if s, ok := e.(migrate.LogStmt); ok && l.verbose {
		fmt.Fprintf(l.out, "%s", indent(s.SQL))
	}
}

// cmdStatus lists the migrations of dir and their state in the target. It
// returns an error (non-zero exit) when the database is dirty or the
// directory fails its checksum; pending migrations are not an error.
func cmdStatus(ctx context.Context, out io.Writer, t *target, dir migrate.Dir, dirName string) error {
	dirErr := validateDir(t.fl, dir, dirName)
	files, err := dir.Files()
	if err != nil {
		return err
	}
	files = migrate.SkipCheckpointFiles(files)
	exists, err := t.revisions().tableExists(ctx)
	if err != nil {
		return err
	}
	var revs []*migrate.Revision
	if exists {
		if revs, err = (t.revisions()).ReadRevisions(ctx); err != nil {
			return fmt.Errorf("read %s: %w", RevisionsTable, err)
		}
	}
	fmt.Fprintf(out, "migrations: %s (%d files)\ndatabase:   schema %q, history in %s.%s\n\n", dirName, len(files), t.schema, t.schema, RevisionsTable)
	byVersion := map[string]*migrate.Revision{}
	var baseline, lastApplied string
	for _, r := range revs {
		byVersion[r.Version] = r
		if r.Type.Has(migrate.RevisionTypeBaseline) {
			baseline = r.Version
		}
		lastApplied = r.Version
	}
	var (
		pending int
		bad     []string
	)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tNAME\tSTATE")
	for _, f := range files {
		v := f.Version()
		r, ok := byVersion[v]
		delete(byVersion, v)
		var state string
		switch {
		case ok && r.Type.Has(migrate.RevisionTypeBaseline):
			state = "baseline (recorded as applied, not run)"
		case ok && dirty(r):
			state = fmt.Sprintf("FAILED %s: %d of %d statements applied: %s", r.ExecutedAt.UTC().Format(time.RFC3339), r.Applied, r.Total, oneLine(r.Error))
			bad = append(bad, fmt.Sprintf("version %s failed; fix the cause and run migrate up again (it retries the file%s)",
				v, map[bool]string{true: fmt.Sprintf(" from statement %d", r.Applied+1), false: ""}[r.Applied > 0]))
		case ok:
			state = fmt.Sprintf("applied %s (%d statements)", r.ExecutedAt.UTC().Format(time.RFC3339), r.Total)
		case baseline != "" && v < baseline:
			state = "before the baseline (not run)"
		case lastApplied != "" && v < lastApplied:
			state = "NOT APPLIED, older than the last applied version (migrate up refuses it)"
			bad = append(bad, fmt.Sprintf("version %s was added out of order", v))
		default:
			state = "pending"
			pending++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v, f.Desc(), state)
	}
	for _, r := range revs {
		if _, ok := byVersion[r.Version]; ok {
			state := "applied, but not in this directory (a newer migrate binary ran it)"
			if dirty(r) {
				state = fmt.Sprintf("FAILED, not in this directory: %s", oneLine(r.Error))
				bad = append(bad, fmt.Sprintf("version %s failed and is not in this directory", r.Version))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Version, r.Description, state)
		}
	}
	tw.Flush()
	fmt.Fprintln(out)
	switch {
	case len(revs) == 0:
		if err := t.drv.CheckClean(ctx, revisions{}.Ident()); err != nil {
			var nc *migrate.NotCleanError
			if !errors.As(err, &nc) {
				return err
			}
			fmt.Fprintf(out, "no migration history, but the schema is not empty (%s):\n"+
				"migrate up refuses it; if ent's automatic migration created it, use migrate up -baseline <version>\n", nc.Reason)
		} else {
			fmt.Fprintf(out, "empty schema: %d pending; run migrate up\n", pending)
		}
	case len(bad) > 0:
	case pending > 0:
		fmt.Fprintf(out, "at version %s; %d pending: run migrate up\n", currentVersion(ctx, t.revisions()), pending)
	default:
		fmt.Fprintf(out, "up to date at version %s\n", currentVersion(ctx, t.revisions()))
	}
	if dirErr != nil {
		bad = append(bad, dirErr.Error())
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "\n"))
	}
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
