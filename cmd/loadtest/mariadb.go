package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/goovo/idem/internal/testkit/mariacluster"
)

// mariadb is the private MariaDB server of a -mysql run
// (internal/testkit/mariacluster): its restarts are a kill -9 of mariadbd
// and a start on the same data directory and port, where InnoDB recovers
// what was committed from its redo log.
type mariadb struct{ *mariacluster.Server }

// restart kills MariaDB with SIGKILL and starts it again; the time is from
// the kill to its first answer.
func (m mariadb) restart(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	// Not cancelled with the run: MariaDB must come back.
	err := m.Restart(context.WithoutCancel(ctx))
	return time.Since(start), err
}

func (m mariadb) ensureRunning() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if m.Running() {
		return m.WaitReady(ctx, 2*time.Minute)
	}
	return m.Start(ctx)
}

func (m mariadb) logFile() string { return m.LogFile() }

// startMariaDB starts a private MariaDB server (max_connections = 100, the
// budget the servers must fit in, as on the private PostgreSQL) and
// creates the run's database in it. stop removes it, keeping its directory
// (stopped) with keep; with a logDir, it first copies MariaDB's log there.
func startMariaDB(ctx context.Context) (m mariadb, db *database, stop func(keep bool, logDir string), err error) {
	s, err := mariacluster.Init(ctx, mariacluster.Options{Settings: map[string]string{"max_connections": "100"}})
	if err != nil {
		return mariadb{}, nil, nil, err
	}
	stop = func(keep bool, logDir string) {
		if logDir != "" {
			copyFile(s.LogFile(), filepath.Join(logDir, "mariadb.log"))
		}
		if keep {
			_ = s.Stop(time.Minute)
			fmt.Printf("private MariaDB kept (stopped) in %s\n", s.Dir())
			return
		}
		if err := s.Remove(); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest: remove the private MariaDB:", err)
		}
	}
	const name = "loadtest"
	err = s.Start(ctx)
	if err == nil {
		err = s.CreateDatabase(ctx, name)
	}
	if err != nil {
		stop(false, "")
		return mariadb{}, nil, nil, err
	}
	url := s.URL(name)
	db = &database{engine: mariadbEngine, adminURL: url, serverURL: url, providerURL: url, name: "database " + name + " of the " + s.String()}
	return mariadb{s}, db, stop, nil
}
