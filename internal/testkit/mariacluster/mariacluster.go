// Package mariacluster runs private MariaDB servers for the tests and the
// load tool, as pgcluster runs private PostgreSQL clusters:
// mariadb-install-db into a temporary directory, mariadbd on a free port
// of 127.0.0.1 with settings of the caller's choosing. A private server can
// be killed with SIGKILL and started again on the same data directory and
// port (InnoDB recovers from its redo log, as after a crash in
// production) without touching the MariaDB that other tests share, and
// Remove deletes it.
//
// It needs MariaDB's server binaries (Debian: the mariadb-server package;
// mariadbd and mariadb-install-db are looked for on PATH, then in
// /usr/sbin and /usr/bin). Run as root, mariadbd runs with --user=root,
// without which it refuses to. The user root has no password and may
// connect from 127.0.0.1 only.
package mariacluster

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/goovo/idem/internal/testkit/pgcluster"
)

// Options configure a private server.
type Options struct {
	// BinDir holds mariadbd and mariadb-install-db. Default: PATH, then
	// /usr/sbin and /usr/bin.
	BinDir string
	// Port is the TCP port on 127.0.0.1. Default: a port that is free now.
	Port int
	// Settings are mariadbd's options (name: value, without the dashes),
	// over the defaults of this package (DefaultSettings).
	Settings map[string]string
}

// DefaultSettings are the options every private server starts from: a
// small memory footprint for machines whose tests run several servers at
// once, and durability against a crash of MariaDB but not of the
// operating system.
//
// innodb_flush_log_at_trx_commit = 2 writes the redo log to the operating
// system at every commit and flushes it to disk once a second: a kill -9
// of mariadbd (which the tests and the load tool do) loses nothing that
// was committed, a crash of the machine (which nothing here causes) could
// lose the last second. innodb_doublewrite = 0 likewise: pages are torn
// only by a crash of the machine. Both spare the shared machine disk
// flushes, as pgcluster's fsync = off does.
var DefaultSettings = map[string]string{
	"innodb_buffer_pool_size":        "32M",
	"innodb_log_file_size":           "32M",
	"innodb_log_buffer_size":         "4M",
	"innodb_flush_log_at_trx_commit": "2",
	"innodb_doublewrite":             "0",
	"key_buffer_size":                "1M",
	"aria_pagecache_buffer_size":     "8M",
	"performance_schema":             "OFF",
	"skip_name_resolve":              "ON",
	"max_connections":                "100",
	"character_set_server":           "utf8mb4",
	"collation_server":               "utf8mb4_bin",
}

// Server is a private MariaDB server in a temporary directory.
type Server struct {
	dir      string // everything: data directory, socket, log
	mariadbd string
	port     int
	settings map[string]string

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil while stopped
	exited chan struct{} // closed when cmd has exited
}

// Init creates a server's data directory with mariadb-install-db (the
// user root, no password, normal authentication); Start starts it. Remove
// deletes it.
func Init(ctx context.Context, opts Options) (*Server, error) {
	mariadbd, install, err := findBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	s := &Server{mariadbd: mariadbd, port: opts.Port, settings: map[string]string{}}
	if s.port == 0 {
		if s.port, err = pgcluster.FreePort(); err != nil {
			return nil, err
		}
	}
	for k, v := range DefaultSettings {
		s.settings[k] = v
	}
	for k, v := range opts.Settings {
		s.settings[k] = v
	}
	if s.dir, err = os.MkdirTemp("", "mariacluster-"); err != nil {
		return nil, err
	}
	// The redo log's size is the install's too: the server need not
	// resize it at its first start.
	args := append([]string{"--no-defaults", "--datadir=" + s.dataDir(),
		"--auth-root-authentication-method=normal", "--skip-test-db",
		"--innodb_log_file_size=" + s.settings["innodb_log_file_size"]}, userArgs()...)
	cmd := exec.CommandContext(ctx, install, args...)
	cmd.Dir = s.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("mariadb-install-db: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return s, nil
}

// Start starts the server on its data directory and port and waits until
// it answers. After a Kill, InnoDB first recovers from its redo log.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return errors.New("mariacluster: Start of a running server")
	}
	logf, err := os.OpenFile(s.LogFile(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(s.mariadbd, s.args()...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a Ctrl-C of the test or the tool reaches it
	// through Remove, in order. Killed if this process dies first, so
	// that no server outlives its test on a shared machine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("mariadbd: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return s.WaitReady(ctx, 2*time.Minute)
}

// args are mariadbd's command line: the settings, then what this package
// decides (the directory's files and 127.0.0.1).
func (s *Server) args() []string {
	args := []string{"--no-defaults"}
	keys := make([]string, 0, len(s.settings))
	for k := range s.settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		args = append(args, "--"+k+"="+s.settings[k])
	}
	args = append(args,
		"--datadir="+s.dataDir(),
		"--socket="+filepath.Join(s.dir, "mariadb.sock"),
		"--pid-file="+filepath.Join(s.dir, "mariadb.pid"),
		"--log-error="+s.LogFile(),
		"--tmpdir="+s.dir,
		"--port="+strconv.Itoa(s.port),
		"--bind-address=127.0.0.1",
	)
	return append(args, userArgs()...)
}

// Kill sends SIGKILL to the server, as a crash would end it: open
// transactions die with it, committed ones are in the redo log. It
// returns once the process has exited (its files are free for Start).
func (s *Server) Kill() error {
	return s.end(syscall.SIGKILL, 0)
}

// Stop shuts the server down cleanly (SIGTERM), or kills it if it has not
// exited after timeout.
func (s *Server) Stop(timeout time.Duration) error {
	return s.end(syscall.SIGTERM, timeout)
}

// end sends sig and waits for the process to exit; after timeout (if not
// 0) it sends SIGKILL.
func (s *Server) end(sig syscall.Signal, timeout time.Duration) error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("mariacluster: signal %v: %w", sig, err)
	}
	if timeout == 0 {
		<-exited
		return nil
	}
	select {
	case <-exited:
		return nil
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("mariacluster: %s did not stop within %v: killed", s, timeout)
	}
}

// Restart kills the server with SIGKILL and starts it again on the same
// data directory and port: a crash and its recovery. It returns when the
// server answers again.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Kill(); err != nil {
		return err
	}
	return s.Start(ctx)
}

// Running reports whether the server's process runs (it may not answer
// yet).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Remove kills the server if it runs (its data is deleted next) and
// deletes its directory.
func (s *Server) Remove() error {
	return errors.Join(s.Kill(), os.RemoveAll(s.dir))
}

// URL returns the mysql:// URL (idemdb.Open, the example server's
// DATABASE_URL) of database on the server, as root.
func (s *Server) URL(database string) string {
	return fmt.Sprintf("mysql://root@127.0.0.1:%d/%s", s.port, database)
}

// DSN returns go-sql-driver's data source of database on the server, as
// root ("" for none).
func (s *Server) DSN(database string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", fmt.Sprintf("127.0.0.1:%d", s.port), database
	cfg.Timeout = 2 * time.Second
	return cfg.FormatDSN()
}

// CreateDatabase creates database with utf8mb4 and a binary collation:
// keys compare byte for byte, as on PostgreSQL (docs/mysql.md).
func (s *Server) CreateDatabase(ctx context.Context, database string) error {
	db, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "CREATE DATABASE `"+database+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
	return err
}

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// Dir is the server's directory: its data directory, socket and log.
func (s *Server) Dir() string { return s.dir }

// LogFile is the server's error log.
func (s *Server) LogFile() string { return filepath.Join(s.dir, "mariadb.log") }

// String names the server for messages.
func (s *Server) String() string { return fmt.Sprintf("private MariaDB 127.0.0.1:%d", s.port) }

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// WaitReady waits until the server answers a query, or timeout; it fails
// at once, with the end of its log, if the process exits.
func (s *Server) WaitReady(ctx context.Context, timeout time.Duration) error {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	db, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = db.ExecContext(cctx, "SELECT 1")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("mariacluster: mariadbd exited at start: %s", s.logTail())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("mariacluster: no answer from %s after %v: %w", s, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logTail returns the last lines of the server's log, for errors.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.LogFile())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-8):], "\n")
}

// userArgs makes mariadbd and mariadb-install-db run as root when this
// process is root: mariadbd refuses to unless told.
func userArgs() []string {
	if os.Geteuid() == 0 {
		return []string{"--user=root"}
	}
	return nil
}

// findBinaries returns the paths of mariadbd and mariadb-install-db.
func findBinaries(binDir string) (mariadbd, install string, err error) {
	find := func(name string) string {
		if binDir != "" {
			return filepath.Join(binDir, name)
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
			if p := filepath.Join(dir, name); fileExists(p) {
				return p
			}
		}
		return ""
	}
	mariadbd, install = find("mariadbd"), find("mariadb-install-db")
	if mariadbd == "" || install == "" || !fileExists(mariadbd) || !fileExists(install) {
		return "", "", errors.New("mariacluster: MariaDB's server binaries (mariadbd, mariadb-install-db) are not installed: on Debian/Ubuntu apt-get install mariadb-server")
	}
	return mariadbd, install, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
