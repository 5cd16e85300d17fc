package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goovo/idem/idemtest"
	"github.com/goovo/idem/internal/testkit"
	"github.com/goovo/idem/internal/testkit/proctest"
)

// Issue 32: a connection is not held for ever. Before, only the headers
// had a bound: 40 connections sending a body one byte at a time and 40
// idle keep-alive connections were all open after 100 s, and 19,985 slow
// bodies exhausted the process's file descriptors. With the phases bounded
// (here short, -read-timeout and -idle-timeout), the server closes both.
// The backend does not matter: SQLite.
func TestServerClosesSlowAndIdleConnections(t *testing.T) {
	bin := proctest.Build(t, ".")
	db := idemtest.Open(t, idemtest.SQLite)
	env, args := serverDatabase(db)
	s := startServer(t, bin, env, append(args, "-sweep-every", "0", "-materialize-every", "0",
		"-read-timeout", "500ms", "-idle-timeout", "500ms"))
	addr := strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/query")
	dial := func(t *testing.T) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// The bound of the wait for the server's close: a test that fails
		// fails here, not by hanging.
		if err := c.SetReadDeadline(time.Now().Add(testkit.WaitBound)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// awaitClose reads until the server closes c.
	awaitClose := func(t *testing.T, r io.Reader) {
		t.Helper()
		_, err := io.Copy(io.Discard, r)
		var ne net.Error
		switch {
		case err == nil, errors.Is(err, syscall.ECONNRESET):
			// EOF, or a reset: the server closed with bytes unread.
		case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
			t.Fatalf("the server kept the connection open for %v", testkit.WaitBound)
		default:
			t.Fatalf("reading until the close: %v", err)
		}
	}

	t.Run("slow body", func(t *testing.T) {
		c := dial(t)
		head := "POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Tenant-ID: acme\r\nContent-Length: 1000\r\n\r\n{"
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		// A byte every 50 ms until the server stops taking them.
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		awaitClose(t, c)
	})

	t.Run("idle keep-alive", func(t *testing.T) {
		c := dial(t)
		body := `{"query":"{ __typename }"}`
		req := "POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Tenant-ID: acme\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Close {
			t.Fatalf("the request was answered %s (close %v): the connection should be kept alive", res.Status, res.Close)
		}
		awaitClose(t, br) // and send nothing more
	})
}
