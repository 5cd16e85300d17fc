import { type Intent } from "./intents.js";
import { type FieldReport, type GraphQLErrorLike, type RetryOptions } from "./retry.js";
/** Where a transport puts the key, as the server is configured to read it. */
export interface KeyOptions {
    /**
     * "variable" (the default): the key is the GraphQL variable keyVariable,
     * which the mutation declares and passes on, as in
     * `mutation($key: String) { createOrder(idempotencyKey: $key, …) }`; a
     * mutation that does not declare it is not idempotent for the client:
     * sent once, as it is. "header": the key goes in the `Idempotency-Key`
     * header, as a structured-field string (`"…"`), for servers that accept
     * it there (idem's Config.KeyHeader); every mutation is idempotent then,
     * unless `isIdempotent` says otherwise.
     */
    keyIn?: "variable" | "header";
    /** The variable of keyIn "variable". Default "key". */
    keyVariable?: string;
}
/** What a transport says during development. */
export interface DevOptions {
    /**
     * Whether to warn about mutations sent without an intent (each then gets
     * a key of its own, which a second call does not share). Default: on,
     * unless `process.env.NODE_ENV` is "production" (which bundlers set).
     */
    dev?: boolean;
    /** Receives the warnings. Default console.warn. */
    warn?: (message: string) => void;
}
/** The fetch function's configuration. */
export interface FetchOptions extends RetryOptions, KeyOptions, DevOptions {
    /** The GraphQL endpoint, such as "/query". Relative URLs resolve against the page. */
    url: string | URL;
    /**
     * Headers of every request (authentication; the example server's
     * X-Tenant-ID), or a function that returns them, called once per send.
     */
    headers?: HeadersInit | (() => HeadersInit | Promise<HeadersInit>);
    /** The fetch to use. Default globalThis.fetch. */
    fetch?: typeof globalThis.fetch;
}
/** One GraphQL operation to send. */
export interface MutationRequest {
    query: string;
    variables?: Record<string, unknown>;
    operationName?: string;
    /**
     * The intent the mutation carries out. Without one, the mutation gets a
     * key for this call only (its retries share it; another call does not),
     * and a warning in development.
     */
    intent?: Intent;
    /** Headers of this request, after the configured ones. */
    headers?: HeadersInit;
    /**
     * Gives the send up: the attempt in flight is aborted, no other is made,
     * and the intent stays unfinished, to be resumed.
     */
    signal?: AbortSignal;
}
/** The final answer to a send. */
export interface MutationResult<TData = unknown> {
    data?: TData | null;
    errors?: ReadonlyArray<GraphQLErrorLike>;
    extensions?: Record<string, unknown>;
    /** What the server reports of each idempotent field, by response name. */
    idempotency: Record<string, FieldReport>;
    /**
     * Whether every idempotent field was replayed from an earlier request's
     * stored result (a retry, a second click, a resume after a reload): the
     * mutation was not run again.
     */
    replayed: boolean;
    /** Attempts made to get this answer. */
    attempts: number;
    /** HTTP status and headers of the answer. */
    status: number;
    headers: Headers;
    /** The idempotency key sent, if the operation is an idempotent mutation. */
    key?: string;
}
/**
 * The error of a send whose final answer is an error: GraphQL errors (a
 * refusal such as IDEMPOTENCY_KEY_REUSED, a business error the server
 * stored and replays, a validation error), an HTTP status other than 2xx,
 * or a body that is not a GraphQL response. The intent is settled: sending
 * it again gets the same answer. Any other error (RetriesExhaustedError,
 * the signal's reason) leaves it unfinished.
 */
export declare class ResponseError<TData = unknown> extends Error {
    name: string;
    readonly result: MutationResult<TData>;
    constructor(result: MutationResult<TData>, message?: string);
    /** The extensions.code of the first error that has one. */
    get code(): string | undefined;
}
/** The framework-free client; see {@link createFetch}. */
export interface MutationFetch {
    <TData = unknown>(request: MutationRequest): Promise<MutationResult<TData>>;
    /**
     * Sends an unfinished intent's recorded request again, with its key: after
     * a reload, the server runs it if no earlier attempt did, or replays the
     * earlier attempt's result. It sends the request as it was first sent
     * (document and variables), not the app's current one: a deploy that
     * changed the mutation's fields in between would otherwise be refused.
     * (A send with a sent intent and another request resumes it too.)
     */
    resume<TData = unknown>(intent: Intent, options?: Pick<MutationRequest, "headers" | "signal">): Promise<MutationResult<TData>>;
}
/**
 * Returns a fetch function for GraphQL: a mutation is sent with its
 * intent's key, recorded in the intent's storage before the first attempt,
 * and retried with the same key and body (and `Idempotency-Retry`) after
 * network failures, HTTP 429/502/503/504 and the retryable codes, waiting
 * as the server asks (`Retry-After`, `retryAfterSeconds`) or with jittered
 * backoff; a final answer settles the intent, and errors reject with
 * {@link ResponseError}. Queries, and mutations without the key variable,
 * are sent once, untouched.
 *
 * ```js
 * const send = createFetch({ url: "/query", headers: { "X-Tenant-ID": "acme" } });
 * const intent = await intents.create({ name: "pay" }); // when the form renders
 * const res = await send({ query: PAY, variables: { order: "42", amount: 1200 }, intent });
 * res.data.createPayment; res.replayed;
 * ```
 */
export declare function createFetch(options: FetchOptions): MutationFetch;
/** Whether warnings for development are on; see {@link DevOptions.dev}. */
export declare function devMode(opts: DevOptions): boolean;
/**
 * The key of a mutation sent without an intent: new, for this call only,
 * with a warning in development (once per operation).
 */
export declare function keyForCall(opts: DevOptions, warned: Set<string>, operation: string | undefined): string;
/** One send, as the fetch function and the urql exchange make it. */
interface Send {
    url: string;
    fetch: typeof globalThis.fetch;
    /** Every header but the protocol's. */
    headers: Headers;
    request: MutationRequest;
    mutation: boolean;
}
/** Sends one GraphQL request with the configured key placement and retries. */
export declare function sendGraphQL<TData>(opts: RetryOptions & KeyOptions & DevOptions, warned: Set<string>, s: Send): Promise<MutationResult<TData>>;
export {};
