package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// BouncerOptions configure a PgBouncer.
type BouncerOptions struct {
	// Bin is the pgbouncer binary. Default: pgbouncer on PATH or in
	// /usr/sbin (Debian's package pgbouncer).
	Bin string
	// Port is the TCP port on 127.0.0.1. Default: a port that is free now.
	Port int
	// PoolMode is "transaction" (the default), "session" or "statement".
	PoolMode string
	// PoolSize is default_pool_size: the most server connections of each
	// pool (one pool per database name and user). Default 20.
	PoolSize int
	// Databases are the database names clients may connect to, each an
	// alias of a database of the target: alias → database. A database
	// name not listed reaches the target's database of the same name.
	// Each name has a pool of its own.
	Databases map[string]string
}

// Bouncer is a PgBouncer process in front of a private cluster, with its
// configuration and log in a temporary directory.
type Bouncer struct {
	dir    string
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // Wait's answer, set before exited is closed
}

// StartBouncer starts PgBouncer in front of target (trust authentication,
// the user postgres) and waits until it accepts connections. Stop ends it.
//
// server_login_retry is 1 s, not PgBouncer's 15 s: after one failed login
// to PostgreSQL (while it restarts, say) PgBouncer refuses every client of
// that pool at once for that long, which the load tool's restarts showed as
// a stretch of IDEMPOTENCY_UNAVAILABLE long after PostgreSQL was back.
func StartBouncer(ctx context.Context, target *Cluster, opts BouncerOptions) (*Bouncer, error) {
	bin := opts.Bin
	if bin == "" {
		var err error
		if bin, err = FindBouncer(); err != nil {
			return nil, err
		}
	}
	b := &Bouncer{port: opts.Port, exited: make(chan struct{})}
	if b.port == 0 {
		var err error
		if b.port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	cred, err := postgresUser()
	if err != nil {
		return nil, err
	}
	if b.dir, err = os.MkdirTemp("", "pgbouncer-"); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(b.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(b.dir)
			return nil, err
		}
	}
	if err := b.writeConfig(target, opts); err != nil {
		os.RemoveAll(b.dir)
		return nil, err
	}
	if err := b.start(bin, cred); err != nil {
		os.RemoveAll(b.dir)
		return nil, err
	}
	if err := WaitReady(ctx, b.URL("postgres"), 30*time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(b.dir, "stderr.log"))
		return nil, errors.Join(fmt.Errorf("pgbouncer: %w\n%s", err, log), b.Stop())
	}
	return b, nil
}

// writeConfig writes pgbouncer.ini and its user list into b.dir: the
// sample's settings (ops/pgbouncer/pgbouncer.ini), with the test's
// addresses, files and pool, and a database entry per alias of
// opts.Databases besides the catch-all.
func (b *Bouncer) writeConfig(target *Cluster, opts BouncerOptions) error {
	mode := opts.PoolMode
	if mode == "" {
		mode = "transaction"
	}
	size := opts.PoolSize
	if size == 0 {
		size = 20
	}
	server := fmt.Sprintf("host=127.0.0.1 port=%d", target.Port())
	var dbs strings.Builder
	aliases := make([]string, 0, len(opts.Databases))
	for a := range opts.Databases {
		aliases = append(aliases, a)
	}
	slices.Sort(aliases)
	for _, a := range aliases {
		fmt.Fprintf(&dbs, "%s = %s dbname=%s\n", a, server, opts.Databases[a])
	}
	fmt.Fprintf(&dbs, "* = %s\n", server)
	sample, err := sampleSettings()
	if err != nil {
		return err
	}
	ini := fmt.Sprintf(`[databases]
%s
[pgbouncer]
%slisten_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
admin_users = postgres
pool_mode = %s
default_pool_size = %d
logfile = %s
`, dbs.String(), sample, b.port, filepath.Join(b.dir, "userlist.txt"), mode, size, b.LogFile())
	files := map[string]string{"pgbouncer.ini": ini, "userlist.txt": `"postgres" ""` + "\n"}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(b.dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// start runs the bouncer as cred (the postgres user when run as root), its
// output in stderr.log, and notes its exit in b.exited.
func (b *Bouncer) start(bin string, cred *syscall.Credential) error {
	b.cmd = exec.Command(bin, filepath.Join(b.dir, "pgbouncer.ini"))
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	b.cmd.Dir = b.dir
	out, err := os.Create(filepath.Join(b.dir, "stderr.log"))
	if err != nil {
		return err
	}
	defer out.Close() // the child has its own descriptor
	b.cmd.Stdout, b.cmd.Stderr = out, out
	if err := b.cmd.Start(); err != nil {
		return fmt.Errorf("pgbouncer: %w", err)
	}
	go func() {
		b.err = b.cmd.Wait()
		close(b.exited)
	}()
	return nil
}

// URL returns the URL of database through the bouncer, as postgres.
func (b *Bouncer) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", b.port, database)
}

// Port is the bouncer's TCP port on 127.0.0.1.
func (b *Bouncer) Port() int { return b.port }

// LogFile is PgBouncer's log.
func (b *Bouncer) LogFile() string { return filepath.Join(b.dir, "pgbouncer.log") }

// Stop ends PgBouncer (SIGTERM: at once, closing every connection) and
// deletes its directory.
func (b *Bouncer) Stop() error {
	select {
	case <-b.exited:
	default:
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.exited:
		case <-time.After(10 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.exited
		}
	}
	return os.RemoveAll(b.dir)
}

// FindBouncer returns the path of pgbouncer: on PATH, or Debian's
// /usr/sbin/pgbouncer (not on a normal user's PATH).
func FindBouncer() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", errors.New("pgbouncer is not installed: on Debian/Ubuntu apt-get install pgbouncer (./scripts/test installs it)")
}

// String names the bouncer for messages.
func (b *Bouncer) String() string { return "PgBouncer 127.0.0.1:" + strconv.Itoa(b.port) }

// sampleSettings returns the [pgbouncer] settings of the repository's
// sample, ops/pgbouncer/pgbouncer.ini, but those Start sets itself (the
// addresses, files, authentication and pool), so that the tests run
// PgBouncer as the sample configures it.
func sampleSettings() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "..", "ops", "pgbouncer", "pgbouncer.ini")
	text, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("pgcluster: the sample PgBouncer configuration: %w", err)
	}
	own := map[string]bool{"listen_addr": true, "listen_port": true, "unix_socket_dir": true, "auth_type": true, "auth_file": true,
		"admin_users": true, "pool_mode": true, "default_pool_size": true, "logfile": true}
	var out strings.Builder
	section := ""
	for line := range strings.Lines(string(text)) {
		l := strings.TrimSpace(line)
		switch {
		case l == "" || strings.HasPrefix(l, ";") || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "["):
			section = l
		case section == "[pgbouncer]":
			name, _, _ := strings.Cut(l, "=")
			if !own[strings.TrimSpace(name)] {
				out.WriteString(l + "\n")
			}
		}
	}
	return out.String(), nil
}
