package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/goovo/idem/idemcode"
)

// verdict is what one HTTP attempt tells the client about its intent:
// either a final answer, or why to retry later with the same key.
type verdict struct {
	final bool
	// kind of a final answer: "executed", "replayed", or the code of a
	// final error (such as ORDER_ALREADY_PAID).
	kind string
	// data is the response's data member, byte for byte.
	data json.RawMessage
	// retry names why a non-final attempt must be retried: network,
	// timeout, http5xx, bad-response, released, or an error code.
	retry string
	// retryAfter is the server's hint (extensions.retryAfterSeconds).
	retryAfter time.Duration
}

type gqlResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
	Extensions struct {
		Idempotency map[string]struct {
			Outcome string `json:"outcome"`
		} `json:"idempotency"`
	} `json:"extensions"`
}

// classify reads the answer to a request whose idempotent field is field.
// Everything that says "nothing was decided for this key" is a retry:
// IDEMPOTENCY_IN_PROGRESS, IDEMPOTENCY_UNAVAILABLE, HTTP 5xx, an
// unreadable body (a server killed while writing it), and the outcome
// "released" (the mutation failed with a retryable error and was rolled
// back). Anything else is the intent's final answer.
func classify(field string, status int, body []byte) verdict {
	if status >= 500 {
		return verdict{retry: "http5xx"}
	}
	var r gqlResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return verdict{retry: "bad-response"}
	}
	code, retryAfter := "", time.Duration(0)
	if len(r.Errors) > 0 {
		code, _ = r.Errors[0].Extensions["code"].(string)
		if s, ok := r.Errors[0].Extensions["retryAfterSeconds"].(float64); ok {
			retryAfter = time.Duration(s * float64(time.Second))
		}
	}
	outcome := r.Extensions.Idempotency[field].Outcome
	switch {
	case outcome == idemcode.OutcomeReleased:
		return verdict{retry: idemcode.OutcomeReleased}
	case code == string(idemcode.InProgress) || code == string(idemcode.Unavailable):
		return verdict{retry: code, retryAfter: retryAfter}
	case status != http.StatusOK:
		return verdict{final: true, kind: fmt.Sprintf("HTTP_%d", status), data: r.Data}
	case len(r.Errors) > 0:
		if code == "" {
			code = "ERROR_WITHOUT_CODE"
		}
		return verdict{final: true, kind: code, data: r.Data}
	case outcome == "":
		return verdict{final: true, kind: "UNMARKED", data: r.Data}
	}
	return verdict{final: true, kind: outcome, data: r.Data}
}

// client sends the attempts of intents and retries them.
type client struct {
	http  *http.Client
	fleet *fleet
	stats *stats
	cfg   *config
	// slots bounds the attempts in flight: each holds up to two database
	// connections on its server, and PostgreSQL's max_connections is
	// shared with whoever else uses the database.
	slots chan struct{}
}

func newClient(cfg *config, f *fleet, st *stats) *client {
	tr := &http.Transport{
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	return &client{http: &http.Client{Transport: tr}, fleet: f, stats: st, cfg: cfg, slots: make(chan struct{}, cfg.maxInFlight)}
}

// attempt sends body once to server i, abandoning it after timeout. A
// retry (retry > 0, its number) says so, as idemclient's do: the server
// then looks the key up before claiming it.
func (c *client) attempt(ctx context.Context, i int, field, tenant string, body []byte, timeout time.Duration, retry int) verdict {
	url := c.fleet.url(i)
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	case <-ctx.Done():
		return verdict{retry: "timeout"}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return verdict{retry: "network"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant-ID", tenant)
	if retry > 0 {
		req.Header.Set(idemcode.HeaderRetry, strconv.Itoa(retry))
	}
	c.stats.requests.Add(1)
	res, err := c.http.Do(req)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(res.Body)
		res.Body.Close()
		if err == nil {
			return classify(field, res.StatusCode, b)
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return verdict{retry: "timeout"}
	}
	return verdict{retry: "network"}
}

// timeout returns the client timeout of the next attempt: usually
// cfg.timeout, sometimes (abandonRate) a short one that abandons the
// request while the server works on it, which cancels the server's context
// mid-mutation.
func (c *client) timeout() time.Duration {
	if c.cfg.abandonRate > 0 && rand.Float64() < c.cfg.abandonRate {
		return time.Millisecond + rand.N(c.cfg.abandonMax)
	}
	return c.cfg.timeout
}

// backoff is the wait before retry n (1, 2, …): exponential with full
// jitter, at least the server's retryAfter hint, at most cfg.maxBackoff.
func (c *client) backoff(n int, retryAfter time.Duration) time.Duration {
	ceiling := min(c.cfg.maxBackoff, 20*time.Millisecond<<min(n, 10))
	d := rand.N(ceiling) + time.Millisecond
	if retryAfter > d {
		d = min(retryAfter, c.cfg.maxBackoff)
	}
	return d
}

// perform sends one copy of an intent, starting at server first, and
// retries it (with the same key and the same body, each retry on the next
// server, as a load balancer would) until it gets a final answer or ctx
// ends. It reports whether it got one.
func (c *client) perform(ctx context.Context, in *intent, first int) bool {
	for n := 0; ; n++ {
		if ctx.Err() != nil {
			return false
		}
		server := (first + n) % c.fleet.size()
		v := c.attempt(ctx, server, in.field, in.tenant, in.body, c.timeout(), n)
		if v.final {
			in.record(v, server)
			c.stats.answers.add(v.kind)
			return true
		}
		if ctx.Err() != nil {
			// The run's deadline, not the server, ended this attempt.
			return false
		}
		c.stats.retries.add(v.retry)
		t := time.NewTimer(c.backoff(n+1, v.retryAfter))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}
