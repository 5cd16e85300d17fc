package idemhttp

import (
	"net/http"
	"time"
)

// Defaults of Timeouts: longer than a reverse proxy's own (nginx waits 60 s
// between two reads of a body or an answer, an AWS load balancer keeps an
// idle connection 60 s), so that the proxy, which knows its client, gives
// up first; a server that closes an idle connection the proxy is about to
// reuse fails the proxy's request.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 2 * time.Minute
	DefaultWriteTimeout      = 5 * time.Minute
	DefaultIdleTimeout       = 2 * time.Minute
)

// Timeouts bound each phase of a connection, so that a client cannot hold
// one, and its file descriptor, for ever: without them 20,000 connections
// that each sent a body one byte at a time exhausted the process's file
// descriptors, and idle keep-alive connections stayed open. A zero field
// takes its default; a negative one turns that bound off.
type Timeouts struct {
	// ReadHeader bounds the reading of a request's headers, from the
	// connection's first byte or the end of the previous request.
	// Default 10 s.
	ReadHeader time.Duration

	// Read bounds the reading of a whole request, headers and body: a
	// body still arriving when it passes fails to read, and the server
	// answers 400 and closes the connection. Default 2 min (a 1 MiB body
	// at 10 kB/s takes under 2).
	Read time.Duration

	// Write bounds a request from the end of its headers to the end of
	// its answer: the handler's work and the answer's writing. An answer
	// not written by then is lost with its connection (the handler runs
	// on: the hook stores the result, and a retry replays it), so it must
	// be longer than the longest a handler takes, the hook's
	// WaitForInFlight included. Default 5 min.
	Write time.Duration

	// Idle bounds how long a keep-alive connection waits for its next
	// request. Default 2 min.
	Idle time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	def := func(v *time.Duration, d time.Duration) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0 // net/http: no bound
		}
	}
	def(&t.ReadHeader, DefaultReadHeaderTimeout)
	def(&t.Read, DefaultReadTimeout)
	def(&t.Write, DefaultWriteTimeout)
	def(&t.Idle, DefaultIdleTimeout)
	return t
}

// NewServer returns an http.Server for h with every phase of a connection
// bounded by t (zero fields take their defaults): serve it with Serve or
// ListenAndServe.
//
//	srv := idemhttp.NewServer(mux, idemhttp.Timeouts{})
//	err := srv.Serve(ln)
func NewServer(h http.Handler, t Timeouts) *http.Server {
	t = t.withDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
	}
}
