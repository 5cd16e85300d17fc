/*
 * idempotency.pml: the claim protocol of one idempotency key K of one
 * tenant, in LEASE mode (the default Mode), as internal/protocol (the
 * decision table), internal/engine/settle.go and internal/engine/attempt.go
 * implement it with the statements of internal/store. Read model/README.md
 * first.
 *
 * The record is the row of K; a variable of this model is one column of it.
 * Every database statement of the protocol is one atomic step (an atomic
 * block: SPIN does not allow jumps into a d_step): the database runs each
 * statement atomically on the row, and the model needs no more than that.
 * Everything a client process does between statements is local to it.
 *
 * "Step N" in the comments refers to the numbered protocol in README.md:
 *   1 LOOKUP  2 CLAIM  3 REPLAY  4 IN_PROGRESS  5 TAKEOVER  6 RUN
 *   7 COMPLETE (and its final-error and retryable variants)  8 CRASH  9 TIME
 *
 * Builds (spin -D... -a idempotency.pml):
 *   (default)            safety: the assertions and the Invariants monitor
 *   -DLIVENESS           adds the LTL property; compile pan without -DSAFETY
 *                        and run  pan -a -f  (weak fairness)
 *   -DBROKEN_NO_FENCING  COMPLETE forgets "AND attempt = n": a worker whose
 *                        claim was taken over can still store its result.
 *                        The safety run must report an error (it breaks
 *                        FENCED; the status = 'pending' guard alone still
 *                        keeps ONE_COMMIT, see README.md).
 *   -DBROKEN_NO_GUARD    COMPLETE has no WHERE at all (forgets the status
 *                        too): a second result overwrites the first and its
 *                        writes commit too. Not run by scripts/modelcheck.
 *   -DSKIP_FENCED_INVARIANT  leaves the FENCED invariant out (to see what
 *                        the other properties catch on their own).
 *   -DDB_CRASH           the database server may crash and restart (step 10,
 *                        at most MAX_DBCRASH times): every open transaction
 *                        is aborted; with synchronous claims nothing
 *                        committed is lost.
 *   -DASYNC_CLAIM        (implies DB_CRASH) a claim commits with
 *                        synchronous_commit = off for its transaction alone:
 *                        visible at once, durable only once its WAL is
 *                        flushed (by the WAL writer, or by any later
 *                        synchronous commit), lost if the database crashes
 *                        before. With today's fence (the attempt alone) the
 *                        safety run must report an error: NAMES_ROW; with
 *                        FENCE_CLAIMED_AT, FIRST_ATTEMPT, which no fence
 *                        restores.
 *   -DSKIP_FIRST_ATTEMPT leaves the FIRST_ATTEMPT assertion out (to see
 *                        what else a lost claim breaks).
 *   -DCHARGE_RECORDED    (with -DLIVENESS) checks charge_recorded in place
 *                        of eventually_result.
 *   -DFLUSH_BEFORE_EFFECT  (with ASYNC_CLAIM) the resolver waits for its
 *                        claim's WAL flush before it charges; the wait
 *                        fails if the database crashed since the claim.
 *   -DDISCONNECT         a client may hang up while its resolver runs, in
 *                        the provider call (MAX_HANGUP times): its attempt
 *                        goes on, and its answer is lost.
 *   -DOUTBOX             adds the outbox's worker (River) and its receiver,
 *                        which deduplicates on the job's downstream key.
 *                        The job is enqueued in every build; JOB_IFF_RESULT
 *                        is checked in every safety run.
 *   -DBROKEN_ENQUEUE_OUTSIDE  the resolver enqueues its outbox job in a
 *                        transaction of its own, not in the one that stores
 *                        the result: the safety run must report an error
 *                        (JOB_IFF_RESULT).
 *   -DJOB_DELIVERED      (with -DLIVENESS) checks job_delivered in place of
 *                        eventually_result.
 *   -DFENCE_CLAIMED_AT   the proposed fence: COMPLETE, RELEASE and TAKEOVER
 *                        match the claim's idempotency_claimed_at as well as
 *                        its attempt, and a re-made claim has another
 *                        claimed_at than the one it replaces.
 *
 * Bounds (assumptions), overridable with -D:
 *   MAX_CRASH      crashes of workers in total (step 8)
 *   MAX_SLOW       times the lease of a worker that is alive runs out
 *                  (a slow worker, step 9); the lease of a crashed worker
 *                  may run out any number of times
 *   MAX_RETRYABLE  retryable errors in total (step 7, release)
 *   MAX_HANGUP     clients that hang up while their resolver runs (a
 *                  closed connection): the attempt goes on, the client
 *                  never sees its answer
 *   MAX_WCRASH     deaths of the outbox's worker after it delivered a job
 *                  and before River recorded it done (it runs it again)
 * They make the state space finite (every takeover needs an expired lease,
 * so attempt <= 1 + MAX_CRASH + MAX_SLOW + MAX_RETRYABLE) and they are what
 * makes progress possible: a key whose every attempt crashes, or is too slow
 * for its lease, or fails with a retryable error, stays pending for ever,
 * and no protocol can help it.
 */

#ifndef MAX_CRASH
#define MAX_CRASH 2
#endif
#ifndef MAX_SLOW
#define MAX_SLOW 2
#endif
#ifndef MAX_RETRYABLE
#define MAX_RETRYABLE 1
#endif
#ifndef MAX_HANGUP
#define MAX_HANGUP 1
#endif
#ifndef MAX_WCRASH
#define MAX_WCRASH 1
#endif
#ifndef MAX_DBCRASH
#define MAX_DBCRASH 1
#endif
#if defined(ASYNC_CLAIM) && !defined(DB_CRASH)
#define DB_CRASH
#endif

mtype = { ABSENT, PENDING, SUCCEEDED, FAILED };

/* ---- The record of K (the database row) --------------------------------- */
mtype status  = ABSENT;	/* idempotency_status; ABSENT: no row */
byte  attempt = 0;	/* idempotency_attempt, the fencing token */
bool  expired = false;	/* idempotency_lease_expires_at <= now (time is abstract) */
byte  claimed_at = 0;	/* idempotency_claimed_at: which INSERT made the row (0: no
			 * row); a claim made again after a lost one has another
			 * value (see FENCE_CLAIMED_AT in README.md) */
bool  unflushed = false; /* the row's INSERT committed asynchronously and its WAL
			 * is not flushed yet: a crash of the database loses it */

/* ---- The payment provider, outside the database ------------------------- */
bool  charged = false;	/* its ledger has a charge for K: its dedupe */
byte  charges = 0;	/* charges it executed for K */

/* ---- The outbox (idemoutbox, docs/protocol.md "Effects after the commit") */
byte  jobs = 0;		/* outbox jobs of K's attempts committed (River's rows) */
bool  acked = false;	/* River recorded the job done */
bool  received = false;	/* the receiver has seen the job's downstream key: its dedupe */
byte  effects = 0;	/* effects the receiver carried out for K's job */

/* ---- Ghost state: what the properties talk about; not in any database --- */
byte  committed = 0;	/* commits of business writes for K */
byte  result_attempt = 0; /* the attempt whose result (status) was stored */
byte  result_claimed_at = 0; /* the claim (its row's claimed_at) of the worker that
			 * stored the result: a generated create's response names
			 * the row of that claim */
byte  inserts = 0;	/* INSERTs of the row so far: the next one's claimed_at */
byte  epoch = 0;	/* database restarts so far: a transaction begun in an
			 * earlier epoch was aborted by the crash */
bool  owner_alive = false; /* the worker of the current attempt still runs */
byte  born_commits = 0;	/* results committed born completed (BORN_COMPLETED):
			 * business writes with no outbox job */

/* ---- Environment budgets (see Bounds above) ----------------------------- */
byte  crashes = 0;
byte  slow = 0;
byte  retryables = 0;
byte  dbcrashes = 0;
byte  hangups = 0;
byte  wcrashes = 0;

/*
 * The fence: the claim a worker owns, (claimed_at c, attempt n). Today's
 * code matches the attempt alone; -DFENCE_CLAIMED_AT adds claimed_at, so
 * that attempt n of a claim made again after a lost one is another claim.
 * Without lost claims (no ASYNC_CLAIM) the two are the same: claimed_at
 * never changes.
 */
#ifdef FENCE_CLAIMED_AT
#define FENCE(n, c)	(attempt == (n) && claimed_at == (c))
#else
#define FENCE(n, c)	(attempt == (n))
#endif

/*
 * The fence of COMPLETE (store.Driver.Complete):
 *   UPDATE … SET status = … WHERE status = 'pending' AND attempt = n
 *   (-DFENCE_CLAIMED_AT: AND claimed_at = c)
 */
#if defined(BROKEN_NO_GUARD)
#define COMPLETE_MATCHES(n, c)	true
#elif defined(BROKEN_NO_FENCING)
#define COMPLETE_MATCHES(n, c)	(status == PENDING)
#else
#define COMPLETE_MATCHES(n, c)	(status == PENDING && FENCE(n, c))
#endif

/* The fence of RELEASE (store.Driver.Release), never broken in this model. */
#define RELEASE_MATCHES(n, c)	(status == PENDING && FENCE(n, c))

/*
 * A synchronous commit that wrote flushes the WAL up to its own commit
 * record, so the asynchronous claim before it with it: from then on the
 * claim is durable. (A statement that matches no row writes nothing and
 * flushes nothing.)
 */
#define FLUSH	unflushed = false

/*
 * Step 8, CRASH: at a crash point the worker may stop (while the crash budget
 * lasts). The guard and the budget are one atomic step so that the budget is
 * never overdrawn; the bookkeeping happens at the label "crashed".
 */
#define CRASH_POINT \
	if \
	:: atomic { crashes < MAX_CRASH -> crashes++; goto crashed } \
	:: true \
	fi

/*
 * A disconnect: the client of a running attempt may hang up (a closed
 * connection, a cancelled request) at any point of the resolver, while the
 * budget lasts. The attempt is not aborted (its context is not the
 * request's, internal/engine/drain.go): it goes on exactly as it would
 * have; only its answer is lost (see "result").
 */
#ifdef DISCONNECT
#define HANGUP_POINT \
	if \
	:: atomic { hangups < MAX_HANGUP && !hung_up -> hangups++; hung_up = true } \
	:: true \
	fi
#else
#define HANGUP_POINT skip
#endif

/*
 * A status write of the record. Once a status is terminal it never changes:
 * every write must find the record pending.
 */
inline store_status(st, n, c)
{
	assert(status == PENDING);	/* terminal states are final */
	status = st;
	result_attempt = n;
	result_claimed_at = c;
	FLUSH
}

/*
 * One client. Each run of the body from "request" is one request with key K
 * (Engine.settle); the client may send it again after an answer that is not
 * a result, as a real client retries with the same key. A persistent client
 * (the one the liveness property relies on) keeps coming back until it gets
 * the result; the others may give up at any answer.
 */
proctype Client(bool persistent; bool recoverer)
{
	mtype s;	/* what LOOKUP read: status, */
	byte  a;	/*   attempt, */
	bool  e;	/*   lease expired, */
	byte  c;	/*   claimed_at */
	byte  n;	/* the attempt this worker owns (0: none) */
	byte  nc;	/* the claimed_at of the claim it owns */
	bool  ran;	/* this request ran once already (run's "ran") */
	bool  tx;	/* business writes are in an open, uncommitted transaction */
	byte  te;	/* the epoch in which that transaction began */
	bool  aborted;	/* a crash of the database aborted it */
#ifdef FLUSH_BEFORE_EFFECT
	byte  ce;	/* the epoch in which this worker got its claim */
#endif
	bool  ok;	/* the last conditional statement matched a row */
	bool  hung_up;	/* this request's client hung up while its attempt ran */

request:
	ran = false; hung_up = false;
	if
	:: recoverer ->
		/* The recoverer (internal/engine/recover.go) is one more client of the
		 * protocol: a round lists the claims still pending whose lease
		 * ran out (store.Driver.Abandoned) and sends each one's stored
		 * operation, with its key, through the ordinary request path:
		 * LOOKUP, then TAKEOVER and RUN, or whatever the row says by
		 * then. It waits here until there is such a claim. */
end_idle:
		atomic { status == PENDING && expired }
	:: else -> skip
	fi;

lookup:
	/* Step 1, LOOKUP (store.Driver.Lookup): one atomic read of the row;
	 * the branches below are the rows of protocol.Decide. (In lease
	 * mode Engine.settle tries the CLAIM first, without a lookup, on its
	 * first round; a failed insert changes nothing, so that run is this
	 * model's run with one LOOKUP more or less.) */
	atomic { s = status; a = attempt; e = expired; c = claimed_at };

	if
	:: s == ABSENT && !ran ->
#ifdef BORN_COMPLETED
		/* A create whose answer its row gives (an atomic create of its
		 * record entity, selection without edges) may be a claim born
		 * completed instead (internal/engine/born.go). */
		if
		:: goto born
		:: skip
		fi;
#endif
		/* Step 2, CLAIM (Engine.claim -> attempt.begin -> insertClaim -> RecordTable.Insert):
		 * INSERT … ON CONFLICT DO NOTHING; in lease mode it commits by
		 * itself, before the resolver's transaction opens. With
		 * ASYNC_CLAIM it commits without waiting for the WAL flush:
		 * visible to every other statement at once, durable later. */
		atomic {
			if
			:: status == ABSENT ->
#ifndef SKIP_FIRST_ATTEMPT
				/* FIRST_ATTEMPT: attempt 1 is the first run
				 * under K; nothing was charged before it. */
				assert(!charged);
#endif
				inserts++;
				status = PENDING; attempt = 1; expired = false; claimed_at = inserts;
				owner_alive = true; n = 1; nc = inserts; ok = true;
#ifdef FLUSH_BEFORE_EFFECT
				ce = epoch;
#endif
#ifdef ASYNC_CLAIM
				unflushed = true
#else
				skip
#endif
			:: else -> ok = false
			fi;
			s = 0; a = 0; e = false; c = 0
		};
		if
		:: ok -> goto work
		:: else -> goto lookup	/* lost the race: read the winner */
		fi

	:: s == ABSENT && ran ->
		/* A request that ran once and then finds no row (its claim was
		 * lost) answers IN_PROGRESS: it never runs the resolver twice
		 * (settle's "else if ran"). The client may retry. */
		atomic { s = 0; a = 0; e = false; c = 0 };
		goto not_a_result

	:: s == SUCCEEDED || s == FAILED ->
		/* Step 3, REPLAY (Engine.replay): the stored result. */
		goto result

	:: s == PENDING && (!e || ran) ->
		/* Step 4, IN_PROGRESS (Engine.inProgress). Also when the
		 * lease ran out but this request already ran once: a request
		 * never runs the resolver twice ("ran" in Engine.settle).
		 * Waiting for the owner (Config.WaitForInFlight) is the same
		 * as answering IN_PROGRESS and the client asking again. */
		atomic { s = 0; a = 0; e = false; c = 0 };
		goto not_a_result

	:: s == PENDING && e && !ran ->
		/* Step 5, TAKEOVER (store.Driver.TakeOver): compare-and-set on the
		 * attempt that LOOKUP saw; succeeds for exactly one caller. */
		/* The takeover keeps the claim's claimed_at (attempt.go's
		 * takenOver copies what the lookup read); with
		 * FENCE_CLAIMED_AT its compare-and-set matches it too. The
		 * worker's row is the one the takeover matched: after a
		 * takeover the resolver reads the row (Claim.Row is nil), so a
		 * response names that row even when the fence is the attempt
		 * alone. It commits synchronously: a claim it takes over is
		 * durable. */
		atomic {
			if
			:: status == PENDING && FENCE(a, c) && expired ->
				attempt++; expired = false; FLUSH;
				owner_alive = true; n = attempt; nc = claimed_at; ok = true;
#ifdef FLUSH_BEFORE_EFFECT
				ce = epoch
#endif
			:: else -> ok = false
			fi;
			s = 0; a = 0; e = false; c = 0
		};
		if
		:: ok -> goto work
		:: else -> goto lookup	/* someone else changed the row */
		fi
	fi;

work:
	/* Step 6, RUN (Engine.run -> the resolver): this worker owns
	 * attempt n until its COMPLETE, or until its lease runs out and
	 * someone takes it over; it is never told which. */
	CRASH_POINT;
#ifdef FLUSH_BEFORE_EFFECT
	/* The resolver waits until its claim is durable before its first
	 * effect outside the database: until the WAL is flushed past the
	 * claim's commit, in the epoch of the claim. If the database crashed
	 * since (its connection broke), the wait fails: a retryable error,
	 * release (fenced), answer an error. */
	if
	:: atomic { ce == epoch && !unflushed -> ce = 0 }
	:: atomic { ce != epoch -> ce = 0 }; goto release
	fi;
#endif
	/* The resolver charges through the provider with key K. The provider
	 * deduplicates by K: a second call returns the first charge. The
	 * charge is outside the database: no rollback or crash undoes it. */
	atomic {
		if
		:: !charged -> charged = true; charges++
		:: else -> skip
		fi
	};
	/* -DDISCONNECT: the client may hang up here, in the provider call
	 * (HANGUP_POINT): that changes nothing for the attempt. */
	HANGUP_POINT;
	CRASH_POINT;
#ifdef BROKEN_ENQUEUE_OUTSIDE
	/* The broken outbox: the job is enqueued in a transaction of its own,
	 * committed at once, whatever becomes of the attempt. */
	jobs++;
	CRASH_POINT;
#endif
	/* Business writes in the transaction attempt.begin opened: invisible to
	 * everyone until it commits. (On pgx BEGIN travels with the first
	 * statement: a transaction begins after a crash of the database that
	 * happened since the claim, on a new connection.) */
#ifdef DB_CRASH
	atomic { tx = true; te = epoch };
#else
	tx = true;	/* local only: no global read (partial-order reduction) */
#endif
	CRASH_POINT;

	if
	:: /* Step 7, COMPLETE (mode.complete, status succeeded): the fenced
	    * update runs in the same transaction, and the commit makes the
	    * business writes and the status visible together, or neither. */
		atomic {
			if
			:: te != epoch -> ok = false; aborted = true	/* see below */
			:: else ->
				if
				:: COMPLETE_MATCHES(n, nc) ->
					store_status(SUCCEEDED, n, nc);
					committed++;	/* the business writes commit */
#ifndef BROKEN_ENQUEUE_OUTSIDE
					jobs++;		/* and the outbox job, enqueued in the same transaction */
#endif
					owner_alive = false;
					ok = true
				:: else -> ok = false	/* 0 rows: roll back */
				fi;
				nc = 0
			fi;
			tx = false; te = 0
		};
		if
		:: ok -> n = 0; goto result
		:: !ok && !aborted -> n = 0; ran = true; goto lookup
		:: aborted ->
			/* Step 10: the database crashed while the transaction
			 * was open and aborted it; COMMIT fails with an error
			 * (run: "complete" fails): release the claim (fenced),
			 * answer an error, the client may retry. */
			goto release
		fi

	:: /* Step 7, final (business) error (mode.complete, status failed,
	    * lease mode): roll the business writes back, then store the
	    * failure with the fenced update on its own (autocommit). */
		tx = false;
		CRASH_POINT;
		atomic {
			if
			:: COMPLETE_MATCHES(n, nc) ->
				store_status(FAILED, n, nc);
				owner_alive = false;
				ok = true
			:: else -> ok = false
			fi;
			te = 0; nc = 0
		};
		if
		:: ok -> n = 0; goto result
		:: else -> n = 0; ran = true; goto lookup
		fi

	:: atomic { retryables < MAX_RETRYABLE -> retryables++ };
		/* Step 7, retryable error (execute's retryable branch, then
		 * Engine.release): roll back, then RELEASE the claim with a
		 * fenced update so that a retry may take it over at once. */
		atomic { tx = false; te = 0 };
release:
		CRASH_POINT;
		atomic {
			if
			:: RELEASE_MATCHES(n, nc) -> expired = true; owner_alive = false; FLUSH
			:: else -> skip
			fi;
			n = 0; nc = 0; aborted = false
		};
		goto not_a_result
	fi;

crashed:
	/* Step 8, CRASH: the process of this worker is gone. Its open
	 * transaction is discarded by the database (tx = false: its writes
	 * never commit). Its claim, if it still holds it, stays pending until
	 * the lease runs out. The client sees a failed request and may retry
	 * (to another server). */
	atomic {
		if
		:: status == PENDING && attempt == n && claimed_at == nc && n > 0 -> owner_alive = false
		:: else -> skip
		fi;
		tx = false; te = 0; n = 0; nc = 0; ran = false; hung_up = false;
		s = 0; a = 0; e = false; c = 0;
#ifdef FLUSH_BEFORE_EFFECT
		ce = 0
#endif
	};
	/* fall through */

#ifdef BORN_COMPLETED
born:
	/* A CLAIM BORN COMPLETED (born.go, docs/protocol.md): the row is
	 * built and the answer rendered in the worker's memory, with no
	 * effect outside it (no provider call, no outbox job: either needs
	 * the transaction, and sends the request to CLAIM instead, with
	 * nothing written); then one autocommitted INSERT … ON CONFLICT DO
	 * NOTHING writes the row, its business fields and its result at
	 * once. A crash before it leaves nothing; a key taken is read
	 * again. */
	CRASH_POINT;
	atomic {
		if
		:: status == ABSENT ->
			inserts++;
			status = SUCCEEDED; attempt = 1; expired = false; claimed_at = inserts;
			result_attempt = 1; result_claimed_at = inserts;
			committed++; born_commits++;
			ok = true
		:: else -> ok = false
		fi;
		s = 0; a = 0; e = false; c = 0
	};
	if
	:: ok -> goto result
	:: else -> goto lookup
	fi;
#endif

not_a_result:
	/* The answer was IN_PROGRESS, a retryable error or a lost connection:
	 * the client retries with the same key, or (unless persistent) gives
	 * up. */
	if
	:: goto request
	:: !persistent -> goto done
	fi;

result:
	/* The answer is the stored result (own or replayed): the request of
	 * this client is answered for good, unless the client hung up while
	 * its attempt ran: the attempt stored its result all the same, and
	 * the client, which never saw it, retries (and is replayed) or gives
	 * up. */
	if
	:: hung_up -> hung_up = false; goto not_a_result
	:: else -> skip
	fi;
done:
	/* Forget the locals, so that finished clients are one state. */
	atomic { ran = false; ok = false }
}

/*
 * Step 9, TIME: a pending lease may run out at any moment. While its owner
 * is alive this is a slow worker (bounded by MAX_SLOW: otherwise every
 * attempt could be overtaken for ever); once its owner crashed, the lease
 * runs out eventually for sure (weak fairness on this process).
 */
active proctype Time()
{
end:
	do
	:: d_step { status == PENDING && !expired && !owner_alive -> expired = true }
	:: d_step { status == PENDING && !expired && owner_alive && slow < MAX_SLOW ->
			expired = true; slow++ }
#ifdef DB_CRASH
	/* Step 10, the database crashes and restarts (one step: while it
	 * is down every statement fails, which is a store error, as a crash
	 * of the worker). Every open transaction is aborted (epoch). What
	 * was committed and flushed survives; an asynchronous claim whose
	 * WAL was not flushed is gone, row and all: the key is unknown
	 * again, and its next INSERT makes it again at attempt 1. The
	 * workers (other machines) do not crash with it. */
	:: d_step { dbcrashes < MAX_DBCRASH ->
			dbcrashes++; epoch++;
			if
			:: unflushed ->
				status = ABSENT; attempt = 0; expired = false; claimed_at = 0;
				owner_alive = false; unflushed = false
			:: else -> skip
			fi }
#endif
#ifdef ASYNC_CLAIM
	/* The WAL writer flushes an asynchronous commit within a few
	 * wal_writer_delay, and any synchronous commit of another key
	 * flushes it too: at any moment. */
	:: d_step { unflushed -> FLUSH }
#endif
	od
}

/*
 * The outbox's worker (River): it runs the job once it exists, and the
 * receiver deduplicates on the job's downstream key (the same for every
 * attempt of K). The worker may die after the receiver got the job and
 * before River recorded it done (MAX_WCRASH times): River runs it again, so
 * a job is delivered at least once.
 */
#ifdef OUTBOX
active proctype Delivery()
{
end:
	do
	:: atomic { jobs > 0 && !acked ->
			if
			:: !received -> received = true; effects++
			:: else -> skip
			fi;
			if
			:: wcrashes < MAX_WCRASH -> wcrashes++
			:: acked = true
			fi }
	od
}
#endif

/*
 * The state invariants, checked in every reachable state by the process
 * Invariants: the guard of an invariant becomes executable exactly when the
 * invariant is false, and its assertion then fails with its text.
 */
#define IMPLIES(p, q)	(!(p) || (q))

/* Safety: the business writes of at most one attempt commit for K. */
#define ONE_COMMIT	(committed <= 1)
/* Safety: the provider charges K at most once (thanks to its dedupe). */
#define ONE_CHARGE	(charges <= 1)
/* A stored result is consistent with the business writes: a pending (or
 * absent) record has none committed, a succeeded one exactly its own, a
 * failed one none (its writes were rolled back). */
#define CONSISTENT	( IMPLIES(status == ABSENT || status == PENDING, committed == 0) && \
			  IMPLIES(status == SUCCEEDED, committed == 1) && \
			  IMPLIES(status == FAILED, committed == 0) )
/* Fencing (Claim.Attempt: "Only the current attempt can store a result"):
 * the stored result is the work of the attempt the record names, so a
 * worker whose claim was taken over stored nothing. */
#define FENCED		IMPLIES(status == SUCCEEDED || status == FAILED, result_attempt == attempt)
/* The stored result is the work of the claim the row is: a generated
 * create's response names the row its worker's claim inserted, and that is
 * the row that exists (not one lost in a crash of the database, whose
 * INSERT was made again by another worker). With the business writes
 * committed in the same transaction as the status (ONE_COMMIT, CONSISTENT),
 * the result and the committed writes are one execution's. */
/* The outbox's rule: a job exists if and only if its attempt's result
 * committed (and so at most one, ONE_COMMIT). */
#define JOB_IFF_RESULT	(jobs + born_commits == committed)
/* Deduplicated downstream: the receiver carries a job out at most once. */
#define ONE_EFFECT	(effects <= 1)
#define NAMES_ROW	IMPLIES(status == SUCCEEDED || status == FAILED, result_claimed_at == claimed_at)

#ifndef LIVENESS
active proctype Invariants()
{
end:
	if
	:: atomic { !ONE_COMMIT -> assert(ONE_COMMIT) }
	:: atomic { !ONE_CHARGE -> assert(ONE_CHARGE) }
	:: atomic { !CONSISTENT -> assert(CONSISTENT) }
	:: atomic { !JOB_IFF_RESULT -> assert(JOB_IFF_RESULT) }
	:: atomic { !ONE_EFFECT -> assert(ONE_EFFECT) }
#ifndef SKIP_FENCED_INVARIANT
	:: atomic { !FENCED     -> assert(FENCED) }
	:: atomic { !NAMES_ROW  -> assert(NAMES_ROW) }
#endif
	fi
}
#endif

/*
 * Two clients send the same key K at once, and the recoverer of the server
 * processes (Config.RecoverAfter) watches it: a third process of the same
 * protocol. No client is persistent: each may give up at any answer that is
 * not a result, as a client that crashed does; the recoverer never gives
 * up. With -DNO_RECOVERER there is none: three clients, client 0
 * persistent, as before the recoverer.
 */
init
{
	atomic {
#ifdef NO_RECOVERER
		run Client(true, false);
		run Client(false, false);
#else
		run Client(false, false);
		run Client(true, true);
#endif
		run Client(false, false)
	}
}

#ifdef LIVENESS
#if defined(JOB_DELIVERED)
/*
 * -DJOB_DELIVERED: delivered at least once: once a job exists, the
 * receiver eventually gets it, whatever deaths of the worker came between.
 */
ltl job_delivered { [] ((jobs > 0) -> <> received) }
#elif !defined(CHARGE_RECORDED)
/*
 * Liveness: the key does not stay pending for ever: once claimed, it
 * eventually holds a result. Checked with weak fairness (pan -a -f), under
 * the bounds above, with no client retrying for sure: the recoverer
 * finishes what the clients abandon (with -DNO_RECOVERER, the persistent
 * client 0 must, and the key must also be claimed).
 */
#ifdef NO_RECOVERER
ltl eventually_result { <> (status == SUCCEEDED || status == FAILED) }
#else
ltl eventually_result { [] ((status == PENDING) -> <> (status == SUCCEEDED || status == FAILED)) }
#endif
#else
/*
 * -DCHARGE_RECORDED: every charge is eventually recorded: once the
 * provider has charged K, the key eventually holds a result, with no client
 * retrying for sure (the recoverer finishes what the clients abandon). A
 * claim lost in a crash of the database breaks it (ASYNC_CLAIM): the charge
 * was made under a claim that no longer exists, and the recoverer, which
 * looks for pending claims, has nothing to find.
 */
ltl charge_recorded { [] (charged -> <> (status == SUCCEEDED || status == FAILED)) }
#endif
#endif
