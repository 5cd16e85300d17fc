// Package idemclient is a small Go client for GraphQL servers whose
// mutations are made retry-safe by idem: it sends a mutation with an
// idempotency key and retries it, with the same key and the same bytes,
// until the server's answer is final for the intent. It uses the standard
// library only.
//
// # One key per intent
//
// An intent is one business action the caller wants done once ("charge
// order 42"). Make its key with NewKey when the intent is born, keep it with
// the intent, and send it with every attempt: the server runs the mutation
// once per key and replays the stored result to every retry. Do never makes
// a key up (a key per call, let alone per attempt, would turn each retry
// into a new intent); a Request without one fails with ErrNoKey.
//
//	c := &idemclient.Client{
//		URL:    "http://127.0.0.1:8080/query",
//		Header: http.Header{"X-Tenant-ID": {"acme"}},
//	}
//	key := idemclient.NewKey() // store it with the intent
//	res, err := c.Do(ctx, idemclient.Request{
//		Query: `mutation($key: String!, $order: ID!, $amount: Int!) {
//			createPayment(idempotencyKey: $key, input: {orderID: $order, amount: $amount}) { id }
//		}`,
//		Variables: map[string]any{"order": "42", "amount": 1200},
//		Key:       key, // sent as the variable $key (Client.KeyVariable)
//	})
//	if err != nil {
//		// A *ResponseError is the intent's final answer (res.Code() says
//		// which). Anything else (ErrRetriesExhausted, ctx's error) leaves
//		// the intent undecided: call Do again later with the same key.
//		return err
//	}
//	var out struct{ CreatePayment struct{ ID string } }
//	err = res.Decode(&out) // and res.Replayed, res.Attempts, res.Idempotency
//
// With Request.KeyInHeader the key travels in the Idempotency-Key header
// instead, for servers that accept it there.
//
// Every retry carries its number in the Idempotency-Retry header
// (idemcode.HeaderRetry), the body unchanged: an idem server then looks the key up
// before claiming it, the cheaper way for a retry that a load balancer
// sends to another server. It is a hint; the answer is the same without it.
//
// # When Do retries
//
// Retried, with the same key and body: network errors, timeouts (including
// Client.AttemptTimeout, after which the attempt is abandoned), HTTP 429,
// 502, 503 and 504, the codes package idemcode classifies as retryable:
// IDEMPOTENCY_IN_PROGRESS (another attempt holds the key; its
// retryAfterSeconds is honoured up to Client.MaxBackoff),
// IDEMPOTENCY_UNAVAILABLE (the server could not reach its record store and
// did not run the mutation) and INTERNAL_SERVER_ERROR (an unexpected error
// on the server), and a field reported with outcome "released" (the
// mutation failed with a retryable error, was rolled back and its key
// freed).
//
// Final, returned at once: success, a replay of an earlier attempt's result,
// a business error the server stored (it is replayed to every retry), and
// the refusals whose code idemcode classifies as final, such as
// IDEMPOTENCY_KEY_REUSED, IDEMPOTENCY_KEY_INVALID, IDEMPOTENCY_KEY_MISSING,
// IDEMPOTENCY_KEY_EXPIRED, IDEMPOTENCY_REQUEST_TOO_LARGE,
// IDEMPOTENCY_RESPONSE_NOT_STORED, BAD_USER_INPUT and UNAUTHENTICATED. A
// code idemcode does not know (an application's own) is final too.
//
// Between attempts Do waits with exponential backoff and full jitter
// (Client.BaseBackoff, Client.MaxBackoff), and gives up after
// Client.MaxAttempts attempts or when ctx is done. Client.OnRetry observes
// every retry, with its Reason.
//
// # Never a new key for an undecided intent
//
// When Do gives up (ErrRetriesExhausted, ctx's error) the intent is
// undecided, and it may still be carried out without the caller: an
// attempt that timed out may be running on the server, and a claim whose
// attempt failed with a retryable error stays with its key, which the
// server's recoverer (idem.Config.RecoverAfter) runs again if no client
// comes back. The server says so in the error of such an attempt ("retry
// with the same idempotency key, never a new one"). So call Do again later
// with the same key, whenever the caller resumes the intent: it gets the
// intent's outcome, whoever carried it out. Do with a new key would be a
// second intent, and the payment could be made twice.
package idemclient
