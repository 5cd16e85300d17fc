/** Defaults of {@link RetryOptions}. */
export declare const Defaults: {
    /** Attempts of one send, the first included: the first and seven retries. */
    readonly maxAttempts: 8;
    /** Backoff ceiling of the first retry, in milliseconds. */
    readonly baseBackoff: 100;
    /** Bound of every wait between two attempts, in milliseconds. */
    readonly maxBackoff: 5000;
    /** The GraphQL variable that carries the key. */
    readonly keyVariable: "key";
};
/** How a transport retries; every field has a default. */
export interface RetryOptions {
    /** Attempts of one send, the first included. Default 8. */
    maxAttempts?: number;
    /**
     * The wait between attempts is "full jitter" exponential backoff: a
     * uniformly random wait between 0 and min(maxBackoff, baseBackoff·2^(retry-1))
     * milliseconds. A server's hint (IDEMPOTENCY_IN_PROGRESS's
     * `retryAfterSeconds`, a `Retry-After` header) replaces the random wait
     * when it is longer, capped at maxBackoff. Defaults 100 and 5000.
     */
    baseBackoff?: number;
    /** See {@link RetryOptions.baseBackoff}. */
    maxBackoff?: number;
    /**
     * Bounds each attempt, in milliseconds: an attempt still running is
     * abandoned and retried. Default: none (the page's or process's own
     * timeouts apply).
     */
    attemptTimeout?: number;
    /**
     * When greater than attemptTimeout, the timeout doubles with each attempt
     * up to it. An abandoned attempt is abandoned on the server too (it rolls
     * the attempt back and frees the key), so a timeout that never grows, set
     * below the time the mutation really takes, would fail every attempt.
     */
    maxAttemptTimeout?: number;
    /** Observes every retry, before its wait: for logs, metrics, a spinner. */
    onRetry?: (retry: RetryInfo) => void;
}
/** Why an attempt was retried. */
export type Reason = 
/** The request failed in transit: whether the server ran it is unknown, which the key makes harmless. */
"network"
/** The attempt ran out of time (attemptTimeout) and was abandoned. */
 | "timeout"
/** HTTP 429, 502, 503 or 504, typically from a proxy or load balancer. */
 | "http-status"
/** IDEMPOTENCY_IN_PROGRESS: another attempt with the key holds it. */
 | "in-progress"
/** IDEMPOTENCY_UNAVAILABLE: the server could not reach its record store and did not run the mutation. */
 | "unavailable"
/** A field was reported "released": it failed with a retryable error, was rolled back and the key freed. */
 | "released"
/** Another retryable code, such as INTERNAL_SERVER_ERROR. */
 | "retryable";
/** One retry, for {@link RetryOptions.onRetry}. */
export interface RetryInfo {
    /** The idempotency key, the same on every attempt. */
    key: string;
    /** The attempt being retried (1 for the first). */
    attempt: number;
    reason: Reason;
    /** HTTP status of the attempt, 0 if none was received. */
    status: number;
    /** The extensions.code behind the reason, if any. */
    code?: string;
    /** The transport's error, for "network" and "timeout". */
    error?: unknown;
    /** The wait before the next attempt, in milliseconds. */
    delay: number;
}
/** A GraphQL error as it arrives in a response. */
export interface GraphQLErrorLike {
    message: string;
    path?: ReadonlyArray<string | number>;
    extensions?: Record<string, unknown>;
}
/** A GraphQL response body. */
export interface GraphQLBody {
    data?: unknown;
    errors?: ReadonlyArray<GraphQLErrorLike>;
    extensions?: Record<string, unknown>;
}
/**
 * What the server reports of one idempotent field, in
 * `extensions.idempotency.<responseName>`.
 */
export interface FieldReport {
    /** The field's idempotency key. */
    key: string;
    /** One of {@link Outcome}: "executed", "replayed", "released", "refused" or "keyless". */
    outcome: string;
    /** outcome === "replayed": the stored result of an earlier request. */
    replayed: boolean;
    /** Until when the key's result is replayable (RFC 3339). */
    expiresAt?: string;
}
/** What one attempt got back, as a transport read it. */
export interface Reply {
    status: number;
    headers?: {
        get(name: string): string | null;
    } | undefined;
    /** The body, when it is a GraphQL response; undefined otherwise. */
    body?: GraphQLBody | undefined;
}
/** An attempt's reply, and the transport's own form of it to hand on. */
export interface Answer<N> {
    reply: Reply;
    native: N;
}
/** The final answer of a send, after `attempts` attempts. */
export interface Settled<N> extends Answer<N> {
    attempts: number;
}
/**
 * The error a send ends with when its last attempt still asked for a
 * retry. The intent may or may not have been carried out: it stays
 * unfinished in its storage, to be sent again later with the same key.
 */
export declare class RetriesExhaustedError extends Error {
    name: string;
    /** The key of the send. */
    readonly key: string;
    /** Attempts made. */
    readonly attempts: number;
    /** Why the last attempt asked for a retry. */
    readonly reason: Reason;
    /** The last reply received, if any. */
    readonly reply: Reply | undefined;
    constructor(key: string, attempts: number, reason: Reason, detail: string, reply: Reply | undefined, cause?: unknown);
}
/** Whether code is one of the codes an idem server answers with ({@link allCodes}). */
export declare function isKnownCode(code: string): boolean;
/**
 * Whether a retry of the same request, with the same key, may get another
 * answer than code: IDEMPOTENCY_IN_PROGRESS, IDEMPOTENCY_UNAVAILABLE and
 * INTERNAL_SERVER_ERROR.
 */
export declare function isRetryableCode(code: string): boolean;
/** Whether code is a known code that no retry of the same request changes. */
export declare function isFinalCode(code: string): boolean;
/** The idempotency reports of a response's extensions, by response name. */
export declare function idempotencyReports(extensions: Record<string, unknown> | undefined | null): Record<string, FieldReport>;
/**
 * Whether every idempotent field of a response was replayed from an
 * earlier request's stored result, from its extensions (`result.extensions`
 * of Apollo's mutate and of urql's results), or, given the response's
 * headers, from `Idempotent-Replayed: true`.
 */
export declare function isReplayed(extensions: Record<string, unknown> | undefined | null, headers?: {
    get(name: string): string | null;
}): boolean;
interface Verdict {
    /** Why to retry; undefined when the answer is final. */
    reason?: Reason;
    code?: string;
    /** The server's hint, in milliseconds; 0 if none. */
    hint: number;
}
/**
 * Reads one reply: the reason to retry it, or none when it is final. A
 * final code wins over the retryable signals of other fields: no retry
 * changes it.
 */
export declare function classify(reply: Reply): Verdict;
/** A response body as a GraphQL response, or undefined when it is not one. */
export declare function parseBody(text: string): GraphQLBody | undefined;
/** The wait after attempt n (1-based) failed: full jitter, or the server's longer hint; both capped at maxBackoff. */
export declare function backoff(n: number, hint: number, opts: RetryOptions): number;
/**
 * Runs attempt until its answer is final for the intent, maxAttempts
 * attempts were made, or signal is aborted. An attempt that throws failed
 * in transit ("network", or "timeout" when attemptTimeout ended it); one
 * that returns is classified by {@link classify}. The attempt's own signal
 * is aborted when the attempt times out or signal is aborted.
 *
 * Throws {@link RetriesExhaustedError}, or signal's reason.
 */
export declare function settle<N>(key: string, attempt: (n: number, signal: AbortSignal) => Promise<Answer<N>>, opts: RetryOptions & {
    signal?: AbortSignal | undefined;
}): Promise<Settled<N>>;
export {};
