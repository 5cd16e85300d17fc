// Package protocol is the claim protocol as a decision table: from the
// record of a key as a request read it, what the request knows of itself,
// and the database time of the read, one decision. It is pure (no
// database, no HTTP, no clock of its own), so that the table can be read,
// and tested, row by row against the transition table of docs/protocol.md
// and the SPIN model (model/idempotency.pml, whose lookup branches are the
// same rows).
//
// The engine (internal/engine, settle) carries each decision out against
// the store: Claim and TakeOver run the mutation under the claim, Replay
// answers the stored result, Refuse and InProgress answer with a code,
// and Wait polls and asks again. Every decision taken on a record read a
// moment ago is safe: the statement that acts on it (the claim's insert,
// the takeover's compare-and-set, the completion) is fenced, and a
// request that loses such a race reads the record again and asks again.
package protocol

import (
	"time"

	"github.com/goovo/idem/idemcode"
	"github.com/goovo/idem/internal/fingerprint"
	"github.com/goovo/idem/internal/record"
)

// Kind is what a request does next.
type Kind int

// The decisions. Their order is the order of the table's rows.
const (
	// Claim: the key has no record; claim it (INSERT … ON CONFLICT DO
	// NOTHING) and run the mutation as attempt 1.
	Claim Kind = iota
	// Replay: the key's record is finished (succeeded or failed) for the
	// same request, within retention: answer the stored result.
	Replay
	// Refuse: answer with Decision.Code, running nothing:
	// IDEMPOTENCY_KEY_FORBIDDEN for another caller's key,
	// IDEMPOTENCY_KEY_EXPIRED past retention, IDEMPOTENCY_KEY_REUSED for a
	// different request (Decision.Differences) or for a row written outside
	// the hook (Decision.Foreign).
	Refuse
	// Wait: another attempt holds the key and the request may still wait
	// for it (idem.Config.WaitForInFlight): poll, then decide again.
	Wait
	// InProgress: another attempt holds the key (or this request already
	// ran once and lost its claim): answer IDEMPOTENCY_IN_PROGRESS.
	InProgress
	// TakeOver: the key's claim is pending and its lease has run out:
	// take it over (attempt + 1, fenced by the attempt read) and run the
	// mutation again.
	TakeOver
)

var kindNames = [...]string{"Claim", "Replay", "Refuse", "Wait", "InProgress", "TakeOver"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(?)"
}

// Request is what the decision needs to know of the request.
type Request struct {
	// Fingerprint is the request's (fingerprint.Fingerprint.String()).
	Fingerprint string
	// Retention is how long the record replays once finished: its
	// mutation's, or its table's.
	Retention time.Duration
	// Ran: this request already ran the mutation once, and lost its claim
	// to a takeover; it never runs it a second time.
	Ran bool
	// MayWait: the request may still wait for the attempt that holds the
	// key, rather than answer IDEMPOTENCY_IN_PROGRESS at once.
	MayWait bool
}

// Decision is one decision of the table.
type Decision struct {
	Kind Kind
	// Code is the refusal's, for Refuse.
	Code idemcode.Code
	// Differences names what differs from the request that first used the
	// key (fingerprint.Differences), for a refusal of a different request.
	Differences []string
	// Foreign: the key belongs to a row whose status is none of the
	// protocol's (written outside the hook).
	Foreign bool
}

// Decide is the table. rec is the key's record as read (nil: the key has
// none), now the database time of the read.
func Decide(rec *record.Record, req Request, now time.Time) Decision {
	if rec == nil {
		if req.Ran {
			// This request ran once and its claim is gone: it never runs
			// the mutation twice; the client may ask again.
			return Decision{Kind: InProgress}
		}
		return Decision{Kind: Claim}
	}
	if fingerprint.OtherOwner(rec.Fingerprint, req.Fingerprint) {
		// First: whatever the record's state, another caller learns
		// nothing of it but that the key is taken.
		return Decision{Kind: Refuse, Code: idemcode.KeyForbidden}
	}
	if Expired(rec, req.Retention, now) {
		return Decision{Kind: Refuse, Code: idemcode.KeyExpired}
	}
	if diffs := fingerprint.Differences(rec.Fingerprint, req.Fingerprint); diffs != nil {
		return Decision{Kind: Refuse, Code: idemcode.KeyReused, Differences: diffs}
	}
	switch rec.Status {
	case record.StatusSucceeded, record.StatusFailed:
		return Decision{Kind: Replay}
	case record.StatusPending:
		if req.Ran || rec.LeaseExpiresAt.After(now) {
			if req.MayWait {
				return Decision{Kind: Wait}
			}
			return Decision{Kind: InProgress}
		}
		return Decision{Kind: TakeOver}
	}
	return Decision{Kind: Refuse, Code: idemcode.KeyReused, Foreign: true}
}

// Expired reports whether a finished record is past its retention window:
// archived by the sweeper, or due to be.
func Expired(rec *record.Record, retention time.Duration, now time.Time) bool {
	if !record.Finished(rec.Status) {
		return false
	}
	return !rec.ArchivedAt.IsZero() || !now.Before(ExpiresAt(rec, retention))
}

// ExpiresAt is until when a finished record's result replays: its
// completion plus retention, or the later expiry its answer promised
// (kept in the lease column at completion, by a process with a longer
// retention than this one): a promise made is kept.
func ExpiresAt(rec *record.Record, retention time.Duration) time.Time {
	at := rec.CompletedAt.Add(retention)
	if rec.LeaseExpiresAt.After(at) {
		return rec.LeaseExpiresAt
	}
	return at
}
