// Package pgcluster runs private PostgreSQL clusters, and PgBouncer in front
// of them, for the tests and the load tool: initdb into a temporary
// directory, a free port on 127.0.0.1, settings of the caller's choosing.
// A private cluster can be stopped, restarted, filled or reconfigured
// without touching the PostgreSQL that other tests share, and Remove
// deletes it.
//
// It needs PostgreSQL's server binaries (Debian: the postgresql package;
// they are looked for in /usr/lib/postgresql/*/bin, then on PATH). Run as
// root, it runs them as the user postgres, since PostgreSQL refuses to run
// as root.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configure a private cluster.
type Options struct {
	// BinDir holds initdb, pg_ctl and postgres. Default: the newest
	// /usr/lib/postgresql/VERSION/bin, else the directory of initdb on
	// PATH.
	BinDir string
	// Port is the TCP port on 127.0.0.1. Default: a port that is free now.
	Port int
	// Settings are postgresql.conf parameters, over the defaults of this
	// package: max_connections = 100, fsync = off (see Init), and Debian's
	// log_line_prefix.
	Settings map[string]string
}

// Cluster is a private PostgreSQL cluster in a temporary directory.
type Cluster struct {
	dir    string // everything: data directory, socket, log
	binDir string
	port   int
	cred   *syscall.Credential // the user postgres, when run as root
}

// defaultSettings are the settings every private cluster starts from.
//
// fsync and full_page_writes are off: they protect committed data against
// a crash of the operating system, which no test here causes, and cost the
// shared machine disk flushes. A crash or a restart of PostgreSQL itself
// (pg_ctl stop -m immediate, kill -9 of a backend) is still recovered from
// the WAL as in production, and synchronous_commit stays on: a commit that
// was acknowledged is in the WAL.
var defaultSettings = map[string]string{
	"max_connections":  "100",
	"fsync":            "off",
	"full_page_writes": "off",
	"shared_buffers":   "32MB",
	"log_line_prefix":  "'%m [%p] %q%u@%d '",
}

// Init creates a cluster with initdb (superuser postgres, trust
// authentication on 127.0.0.1 only) and configures it; Start starts it.
// Remove deletes it.
func Init(ctx context.Context, opts Options) (*Cluster, error) {
	binDir := opts.BinDir
	if binDir == "" {
		var err error
		if binDir, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	c := &Cluster{binDir: binDir, port: opts.Port}
	if c.port == 0 {
		var err error
		if c.port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	var err error
	if c.cred, err = postgresUser(); err != nil {
		return nil, err
	}
	if c.dir, err = os.MkdirTemp("", "pgcluster-"); err != nil {
		return nil, err
	}
	if c.cred != nil {
		if err := os.Chown(c.dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			os.RemoveAll(c.dir)
			return nil, err
		}
	}
	if _, err := c.run(ctx, "initdb", "-D", c.dataDir(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(c.dir)
		return nil, err
	}
	settings := map[string]string{
		"listen_addresses":        "'127.0.0.1'",
		"port":                    strconv.Itoa(c.port),
		"unix_socket_directories": "'" + c.dir + "'",
	}
	for k, v := range defaultSettings {
		settings[k] = v
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	if err := c.Configure(settings); err != nil {
		os.RemoveAll(c.dir)
		return nil, err
	}
	return c, nil
}

// Configure appends settings to postgresql.conf (later lines win). They take
// effect at the next Start or Restart.
func (c *Cluster) Configure(settings map[string]string) error {
	f, err := os.OpenFile(filepath.Join(c.dataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("\n# pgcluster\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, settings[k])
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Start starts the cluster and waits until it accepts connections.
func (c *Cluster) Start(ctx context.Context) error {
	if _, err := c.run(ctx, "pg_ctl", "-D", c.dataDir(), "-l", c.LogFile(), "-w", "-t", "60", "start"); err != nil {
		return err
	}
	return c.WaitReady(ctx, time.Minute)
}

// Stop stops the cluster in fast mode: open sessions are terminated,
// their transactions rolled back, as clients see a crash of the database.
func (c *Cluster) Stop(ctx context.Context) error {
	_, err := c.run(ctx, "pg_ctl", "-D", c.dataDir(), "-m", "fast", "-w", "-t", "60", "stop")
	return err
}

// Restart stops the cluster in fast mode and starts it again, and waits
// until it accepts connections.
func (c *Cluster) Restart(ctx context.Context) error {
	if _, err := c.run(ctx, "pg_ctl", "-D", c.dataDir(), "-l", c.LogFile(), "-m", "fast", "-w", "-t", "60", "restart"); err != nil {
		return err
	}
	return c.WaitReady(ctx, time.Minute)
}

// Running reports whether the cluster's postmaster runs.
func (c *Cluster) Running(ctx context.Context) bool {
	_, err := c.run(ctx, "pg_ctl", "-D", c.dataDir(), "status")
	return err == nil
}

// Remove stops the cluster if it runs (immediately: its data is deleted
// next) and deletes its directory.
func (c *Cluster) Remove() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	if c.Running(ctx) {
		_, err = c.run(ctx, "pg_ctl", "-D", c.dataDir(), "-m", "immediate", "-w", "stop")
	}
	return errors.Join(err, os.RemoveAll(c.dir))
}

// URL returns the URL of database on the cluster, as the superuser
// postgres.
func (c *Cluster) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, database)
}

// Port is the cluster's TCP port on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Dir is the cluster's directory: its data directory, socket and log.
func (c *Cluster) Dir() string { return c.dir }

// LogFile is the server log, with Debian's log_line_prefix.
func (c *Cluster) LogFile() string { return filepath.Join(c.dir, "postgresql.log") }

// String names the cluster for messages.
func (c *Cluster) String() string { return fmt.Sprintf("private cluster 127.0.0.1:%d", c.port) }

// WaitReady waits until the cluster accepts connections, or timeout.
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	return WaitReady(ctx, c.URL("postgres"), timeout)
}

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }

// run runs one of the cluster's binaries, as postgres when needed, and
// returns its output; a failure carries the output.
func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return runAs(ctx, c.cred, filepath.Join(c.binDir, name), args...)
}

func runAs(ctx context.Context, cred *syscall.Credential, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Dir = os.TempDir() // a directory the user postgres may enter
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %v: %s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.Bytes(), nil
}

// postgresUser returns the credential of the user postgres when this
// process runs as root (PostgreSQL and PgBouncer refuse to run as root),
// and nil otherwise: the binaries then run as the current user.
func postgresUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root needs the user postgres to run PostgreSQL as: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// FindBinDir returns the directory of the newest PostgreSQL server binaries:
// /usr/lib/postgresql/VERSION/bin (Debian), else the directory of initdb on
// PATH.
func FindBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(a) - versionOf(b) })
	if len(dirs) > 0 {
		return filepath.Dir(dirs[len(dirs)-1]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("pgcluster: PostgreSQL's server binaries (initdb, pg_ctl) are not installed: on Debian/Ubuntu apt-get install postgresql")
}

// versionOf returns the major version in /usr/lib/postgresql/15/bin/initdb.
func versionOf(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

// FreePort returns a TCP port on 127.0.0.1 that nobody listened on a moment
// ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WaitReady waits until the PostgreSQL (or PgBouncer) at url accepts
// connections and answers a query, or timeout.
func WaitReady(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, url)
		if err == nil {
			_, err = conn.Exec(cctx, "SELECT 1")
			conn.Close(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no connection to %s after %v: %w", url, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
