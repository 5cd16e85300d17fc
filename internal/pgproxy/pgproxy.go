// Package pgproxy is a TCP proxy for tests, put between a PostgreSQL client
// and server on loopback. It counts the client's round trips (each time
// the client speaks after the server has answered) and statements
// (Execute and simple Query messages), so that a test can assert how many
// round trips an operation costs without timing it; and it can break every
// connection, or refuse new ones, as a network failure or a server restart
// would.
package pgproxy

import (
	"encoding/binary"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
)

// Proxy forwards connections from its address to a PostgreSQL server.
type Proxy struct {
	ln     net.Listener
	target string

	roundTrips, statements atomic.Int64
	refuse                 atomic.Bool

	mu    sync.Mutex
	links map[*link]struct{}
	wg    sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target
// ("host:port").
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// For returns a proxy to the server of the postgres:// URL dsn, and dsn
// rewritten to go through it.
func For(dsn string) (*Proxy, string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, "", err
	}
	p, err := Start(u.Host)
	if err != nil {
		return nil, "", err
	}
	u.Host = p.Addr()
	return p, u.String(), nil
}

// Addr is the proxy's "host:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// RoundTrips returns the round trips counted since the last Reset, over
// every connection: a client that sends a pipeline of statements and waits
// for their results makes one.
func (p *Proxy) RoundTrips() int { return int(p.roundTrips.Load()) }

// Statements returns the statements the clients sent since the last Reset
// (Execute messages of the extended protocol, Query messages of the simple
// one).
func (p *Proxy) Statements() int { return int(p.statements.Load()) }

// Reset sets the counts to zero.
func (p *Proxy) Reset() {
	p.roundTrips.Store(0)
	p.statements.Store(0)
}

// BreakAll closes every connection open through the proxy, on both sides.
func (p *Proxy) BreakAll() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Refuse makes the proxy close new connections at once (refuse true), as
// a server that is down does, or accept them again (false).
func (p *Proxy) Refuse(refuse bool) { p.refuse.Store(refuse) }

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.BreakAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		l := &link{p: p, client: client, server: server, serverSpoke: true, parser: parser{startup: true}}
		p.mu.Lock()
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go l.pump(client, server, true)
		go l.pump(server, client, false)
	}
}

// link is one proxied connection.
type link struct {
	p              *Proxy
	client, server net.Conn

	mu          sync.Mutex
	serverSpoke bool // the server sent something since the client last did
	parser      parser
	closeOnce   sync.Once
}

func (l *link) close() {
	l.closeOnce.Do(func() {
		l.client.Close()
		l.server.Close()
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
	})
}

// pump copies from src to dst. The client's bytes are counted before they
// are forwarded, so that the server's answer is always seen after them.
func (l *link) pump(src, dst net.Conn, fromClient bool) {
	defer l.p.wg.Done()
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.mu.Lock()
			if fromClient {
				if l.serverSpoke {
					l.p.roundTrips.Add(1)
					l.serverSpoke = false
				}
				l.parser.feed(buf[:n], func(typ byte) {
					if typ == 'E' || typ == 'Q' {
						l.p.statements.Add(1)
					}
				})
			} else {
				l.serverSpoke = true
			}
			l.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, or the other side's pump closed the link
		}
	}
}

// parser finds the frontend messages in the client's byte stream: the
// untyped startup messages (SSL request, startup), then typed messages.
type parser struct {
	startup bool
	hdr     []byte
	skip    int
}

// protocol3 is the version code of a StartupMessage; after it, every
// message has a type byte.
const protocol3 = 196608

func (p *parser) feed(b []byte, onMessage func(typ byte)) {
	for len(b) > 0 {
		if p.skip > 0 {
			n := min(p.skip, len(b))
			b, p.skip = b[n:], p.skip-n
			continue
		}
		need := 5
		if p.startup {
			need = 8
		}
		n := min(need-len(p.hdr), len(b))
		p.hdr, b = append(p.hdr, b[:n]...), b[n:]
		if len(p.hdr) < need {
			return
		}
		if p.startup {
			length := int(binary.BigEndian.Uint32(p.hdr[0:4]))
			p.skip = length - 8
			p.startup = binary.BigEndian.Uint32(p.hdr[4:8]) != protocol3
		} else {
			p.skip = int(binary.BigEndian.Uint32(p.hdr[1:5])) - 4
			onMessage(p.hdr[0])
		}
		p.hdr = p.hdr[:0]
	}
}
