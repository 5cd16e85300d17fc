package main

import (
	"fmt"
	"regexp"
	"strconv"

	"ariga.io/atlas/sql/migrate"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverRecord is how a migration file records the River versions it
// applies: in River's own table, as River's migrator does, so that
// River's migrator (idemoutbox.Migrate, the server's -migrate) finds them
// applied.
var riverRecord = regexp.MustCompile(`(?i)INSERT INTO river_migration \(line, version\) VALUES ([^;]*);`)

var riverVersion = regexp.MustCompile(`\('main', (\d+)\)`)

// riverVersionOf returns the last River version the files of dir apply.
func riverVersionOf(dir migrate.Dir) (int, error) {
	files, err := dir.Files()
	if err != nil {
		return 0, err
	}
	last := 0
	for _, f := range files {
		for _, rec := range riverRecord.FindAllSubmatch(f.Bytes(), -1) {
			for _, v := range riverVersion.FindAllSubmatch(rec[1], -1) {
				n, _ := strconv.Atoi(string(v[1]))
				last = max(last, n)
			}
		}
	}
	return last, nil
}

// riverRequired is the last migration of the River this module requires.
func riverRequired() (int, error) {
	m, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return 0, err
	}
	all := m.AllVersions()
	return all[len(all)-1].Version, nil
}

// checkRiver is check's verdict on River's tables: the migrations must
// bring them to the version of the River this module requires.
func checkRiver(dir migrate.Dir, dirName string) (string, error) {
	have, err := riverVersionOf(dir)
	if err != nil {
		return "", err
	}
	want, err := riverRequired()
	if err != nil {
		return "", err
	}
	if have >= want {
		return "", nil
	}
	return fmt.Sprintf("the migrations in %s bring River's tables to its version %d; the River this module requires needs version %d.\n"+
		"Add River's migrations %d to %d (rivermigrate's SQL, statement by statement, recorded in river_migration): see docs/outbox.md",
		dirName, have, want, have+1, want), nil
}
