package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Replication is how a primary waits for its standby at commit.
type Replication int

const (
	// Synchronous: the primary's commit waits until the standby has
	// flushed its WAL (synchronous_standby_names = '*', synchronous_commit
	// = on). A commit acknowledged to a client is on both.
	Synchronous Replication = iota
	// Asynchronous: the primary acknowledges a commit once its own WAL has
	// it; the standby follows when it can. A commit acknowledged while
	// the standby lags is lost when the standby is promoted.
	Asynchronous
)

// String names the setting for messages and subtests.
func (r Replication) String() string {
	if r == Synchronous {
		return "synchronous"
	}
	return "asynchronous"
}

// Pair is a primary and a streaming standby of it, private clusters on
// 127.0.0.1. Fail kills the primary and promotes the standby, as an
// operator's failover (or Patroni's) does: Primary and Standby are then
// the clusters as they were made, and Current names the one that serves
// writes.
//
// The promotion is pg_ctl promote, not Patroni: Patroni (and its store,
// etcd) decide by leader keys with a TTL of tens of seconds, a time that
// would dominate a test meant to run in the test command within a couple
// of minutes, and it promotes when its loop next runs, not when the test
// says. What a failover does to the application is the same: the old
// primary's connections die, the standby becomes writable with what it
// had received.
type Pair struct {
	Primary, Standby *Cluster
	Mode             Replication
	failed           bool
}

// NewPair starts a primary (opts' settings, plus those of mode) and a
// standby made from it with pg_basebackup -R, and waits until the standby
// streams (and, in Synchronous mode, is the primary's synchronous
// standby). Remove deletes both.
func NewPair(ctx context.Context, mode Replication, opts Options) (*Pair, error) {
	settings := map[string]string{"wal_level": "replica", "max_wal_senders": "4", "hot_standby": "on",
		"wal_sender_timeout": "5s", "wal_receiver_timeout": "5s", "wal_retrieve_retry_interval": "200ms"}
	if mode == Synchronous {
		settings["synchronous_standby_names"] = "'*'"
		settings["synchronous_commit"] = "on"
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	opts.Settings = settings
	primary, err := Init(ctx, opts)
	if err != nil {
		return nil, err
	}
	p := &Pair{Primary: primary, Mode: mode}
	if err := primary.Start(ctx); err != nil {
		return nil, errors.Join(err, primary.Remove())
	}
	if p.Standby, err = primary.standby(ctx); err != nil {
		return nil, errors.Join(err, primary.Remove())
	}
	if err := p.waitStreaming(ctx); err != nil {
		return nil, errors.Join(err, p.Remove())
	}
	return p, nil
}

// standby makes a standby of c with pg_basebackup -R (which writes
// primary_conninfo and standby.signal) and starts it.
func (c *Cluster) standby(ctx context.Context) (*Cluster, error) {
	s := &Cluster{binDir: c.binDir, cred: c.cred}
	var err error
	if s.port, err = FreePort(); err != nil {
		return nil, err
	}
	if s.dir, err = os.MkdirTemp("", "pgcluster-standby-"); err != nil {
		return nil, err
	}
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			os.RemoveAll(s.dir)
			return nil, err
		}
	}
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=standby", c.port)
	if _, err := s.run(ctx, "pg_basebackup", "-d", conninfo, "-D", s.dataDir(), "-R", "-X", "stream", "--no-sync", "-c", "fast"); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	// The copy has the primary's postgresql.conf: its own address here.
	// No synchronous standby of its own: once promoted it is alone, and a
	// primary that waits for a standby nobody runs would never commit
	// (Patroni's synchronous_mode, not strict, drops the setting too).
	if err := s.Configure(map[string]string{"port": strconv.Itoa(s.port), "unix_socket_directories": "'" + s.dir + "'",
		"synchronous_standby_names": "''"}); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	if _, err := s.run(ctx, "pg_ctl", "-D", s.dataDir(), "-l", s.LogFile(), "-w", "-t", "60", "start"); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	return s, s.WaitReady(ctx, time.Minute)
}

// waitStreaming waits until the primary sees its standby streaming, and,
// in Synchronous mode, as its synchronous standby.
func (p *Pair) waitStreaming(ctx context.Context) error {
	want := "async"
	if p.Mode == Synchronous {
		want = "sync"
	}
	var state string
	err := poll(ctx, time.Minute, func() (bool, error) {
		var err error
		state, err = p.queryString(ctx, p.Primary, `SELECT coalesce((SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming' LIMIT 1), '')`)
		return state == want, err
	})
	if err != nil {
		return fmt.Errorf("pgcluster: the standby is not streaming as %s (%q): %w", want, state, err)
	}
	return nil
}

// URL is a two-host URL of database, the primary first, with
// target_session_attrs=read-write: a client (pgx, libpq) connects to
// whichever of the two accepts writes, before and after a failover.
// connect_timeout bounds each host's attempt: a killed primary refuses at
// once, but a host that does not answer would hold a connection for the
// operating system's TCP timeout. It is 10 s, not 2: right after a
// promotion every pool reconnects at once, and on a loaded machine (a
// load of 35 on two cores) a 2 s bound failed attempts that were merely
// slow, whose clients tried again at once, and the storm did not settle
// for minutes.
func (p *Pair) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=10",
		p.Primary.port, p.Standby.port, database)
}

// Current is the cluster that accepts writes: the primary, or after Fail
// the promoted standby.
func (p *Pair) Current() *Cluster {
	if p.failed {
		return p.Standby
	}
	return p.Primary
}

// HoldWAL stops the primary's WAL sender (SIGSTOP): the standby receives
// nothing more, as behind a slow or broken link. In Synchronous mode every
// commit then waits; in Asynchronous mode commits go on, acknowledged, and
// the standby falls behind. The returned function resumes the sender.
func (p *Pair) HoldWAL(ctx context.Context) (resume func() error, err error) {
	pid, err := p.queryString(ctx, p.Primary, `SELECT coalesce((SELECT pid::text FROM pg_stat_replication LIMIT 1), '')`)
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(pid)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: no WAL sender on %s", p.Primary)
	}
	if err := syscall.Kill(n, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("pgcluster: stopping the WAL sender %d: %w", n, err)
	}
	return func() error {
		err := syscall.Kill(n, syscall.SIGCONT)
		if errors.Is(err, syscall.ESRCH) {
			return nil // killed with the primary
		}
		return err
	}, nil
}

// Fail kills every process of the primary at once (SIGKILL to the
// postmaster's process group: the postmaster, its backends, its WAL
// sender), as a crash of its machine does, then promotes the standby and
// waits until it accepts writes. It returns how long the promotion took.
func (p *Pair) Fail(ctx context.Context) (time.Duration, error) {
	if err := p.Primary.Kill(); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := p.Standby.Promote(ctx); err != nil {
		return 0, err
	}
	p.failed = true
	return time.Since(start), nil
}

// Kill sends SIGKILL to the cluster's postmaster and every process of its
// group (pg_ctl starts the postmaster in a session of its own, so the
// group is the postmaster and its children), and waits until the
// postmaster is gone.
func (c *Cluster) Kill() error {
	pid, err := c.postmasterPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("pgcluster: kill -9 of %s's process group %d: %w", c, pid, err)
	}
	return poll(context.Background(), time.Minute, func() (bool, error) {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH), nil
	})
}

// Promote makes a standby a primary (pg_ctl promote) and waits until it
// accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	if _, err := c.run(ctx, "pg_ctl", "-D", c.dataDir(), "-w", "-t", "60", "promote"); err != nil {
		return err
	}
	return poll(ctx, time.Minute, func() (bool, error) {
		ro, err := (&Pair{}).queryString(ctx, c, "SHOW transaction_read_only")
		return err == nil && ro == "off", nil
	})
}

// postmasterPID reads the first line of the data directory's
// postmaster.pid.
func (c *Cluster) postmasterPID() (int, error) {
	text, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("pgcluster: %s is not running: %w", c, err)
	}
	first, _, _ := strings.Cut(string(text), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// Remove deletes both clusters.
func (p *Pair) Remove() error {
	return errors.Join(p.Primary.Remove(), p.Standby.Remove())
}

// queryString runs a one-value query on c in a connection of its own.
func (p *Pair) queryString(ctx context.Context, c *Cluster, q string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, c.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var s string
	err = conn.QueryRow(cctx, q).Scan(&s)
	return s, err
}

// poll calls cond every 50 ms until it is true, fails, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not the case after %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
