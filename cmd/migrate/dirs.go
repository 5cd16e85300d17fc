package main

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"

	"ariga.io/atlas/sql/migrate"
)

// DefaultDir is the committed PostgreSQL migration directory, relative to
// the repository root (where the developer's commands run).
const DefaultDir = "ent/migrate/migrations"

// DefaultMySQLDir is the committed MySQL migration directory.
const DefaultMySQLDir = "ent/migrate/mysqlmigrations"

// openDir opens the migration directory at path; an empty path means the
// flavor's migrations compiled into this binary.
func openDir(fl *flavor, path string) (migrate.Dir, string, error) {
	if path != "" {
		d, err := migrate.NewLocalDir(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, "", fmt.Errorf("migration directory %s does not exist (run from the repository root, or set -dir)", path)
			}
			return nil, "", err
		}
		return d, path, nil
	}
	d, err := memDir(fl.embedded)
	return d, fl.embeddedName(), err
}

// openValidDir opens the migration directory at path, as openDir does, and
// refuses it unless its atlas.sum matches its files (validateDir).
func openValidDir(fl *flavor, path string) (migrate.Dir, string, error) {
	d, name, err := openDir(fl, path)
	if err != nil {
		return nil, "", err
	}
	if err := validateDir(fl, d, name); err != nil {
		return nil, "", err
	}
	return d, name, nil
}

// memDir copies the .sql files and atlas.sum of fsys into a migrate.MemDir.
func memDir(fsys fs.FS) (*migrate.MemDir, error) {
	d := &migrate.MemDir{}
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	names = append(names, migrate.HashFileName)
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := d.WriteFile(n, b); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// copyDir returns an in-memory copy of d, files and atlas.sum as they are.
func copyDir(d migrate.Dir) (*migrate.MemDir, error) { return memDir(d) }

// validateDir checks that the directory's atlas.sum matches its files, with
// a message that says what to do.
func validateDir(fl *flavor, d migrate.Dir, name string) error {
	err := migrate.Validate(d)
	var cerr *migrate.ChecksumError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &cerr):
		return fmt.Errorf("%s: %s does not match the migration files (%s was %s): a migration file was changed, added or removed by hand.\n"+
			"Never edit a migration that may have run somewhere; add a new one (go run ./cmd/migrate diff%[5]s <name>, or new%[5]s <name> for a hand-written one).\n"+
			"If the change is intended and the file never ran anywhere, run go run ./cmd/migrate hash%[5]s",
			name, migrate.HashFileName, cerr.File, cerr.Reason, fl.flag())
	case errors.Is(err, migrate.ErrChecksumNotFound):
		return fmt.Errorf("%s: %s is missing: run go run ./cmd/migrate hash%s", name, migrate.HashFileName, fl.flag())
	default:
		return fmt.Errorf("%s: %w", name, err)
	}
}

// migrationName is what a developer may call a migration: it becomes the
// file name after the version.
var migrationName = regexp.MustCompile(`^[a-z0-9][a-z0-9_]*$`)

func checkName(name string) error {
	if !migrationName.MatchString(name) {
		return fmt.Errorf("migration name %q: use lower-case letters, digits and underscores, e.g. add_refund_reason", name)
	}
	return nil
}
