/** HTTP header names of the protocol (idemcode's Header… constants). */
export declare const Header: {
    /** Carries the key (IETF draft-ietf-httpapi-idempotency-key-header): a structured-field String ("abc") or a bare key (see idemhttp.ParseKeyHeader). */
    readonly Key: "Idempotency-Key";
    /** Is set to "true" on a response in which every idempotent field was replayed from its record. */
    readonly Replayed: "Idempotent-Replayed";
    /** Marks a request as a retry of an earlier one with the same keys: a positive integer, the retry's number (1 for the first retry), as idemclient's Do sends it; the first attempt does not send it. */
    readonly Retry: "Idempotency-Retry";
};
/** One of the names of {@link Header}. */
export type Header = (typeof Header)[keyof typeof Header];
/** The outcome of an idempotent field, as a response's `extensions.idempotency.<field>.outcome`
 * reports it (idemcode's Outcome… constants). */
export declare const Outcome: {
    /** The mutation ran and its result (data or a final error) was stored. */
    readonly Executed: "executed";
    /** The stored result of an earlier request. */
    readonly Replayed: "replayed";
    /** The mutation failed with a retryable error; its writes were rolled back, nothing was stored and the key is free for a retry (idemclient's Do retries). */
    readonly Released: "released";
    /** The hook answered with one of its errors (see the error's code) without running the mutation. */
    readonly Refused: "refused";
    /** The mutation's key is optional during a rollout (@idempotent(keyRequired: false)) and the call sent none, so it ran as it did before it was idempotent: nothing was claimed or stored, and a retry runs it again. */
    readonly Keyless: "keyless";
};
/** One of the names of {@link Outcome}. */
export type Outcome = (typeof Outcome)[keyof typeof Outcome];
