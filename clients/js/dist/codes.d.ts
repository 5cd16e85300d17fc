/**
 * The error codes (a GraphQL error's `extensions.code`) that a server with
 * the idem hook answers with, by their names in Go's package idemcode. A
 * retryable code may change on a retry of the same request with the same
 * key; a final one never does. A code not listed here (an application's
 * own, such as the example's ORDER_ALREADY_PAID) is final.
 */
export declare const Code: {
    /**
     * KeyMissing: the mutation needs a key and none was sent. Final.
     */
    readonly KeyMissing: "IDEMPOTENCY_KEY_MISSING";
    /**
     * KeyInvalid: the key is malformed (empty, over 255 bytes, not
     * printable ASCII, an Idempotency-Key header that is not one
     * structured-field string or bare token), or the operation names one
     * key for several idempotent fields. Final.
     */
    readonly KeyInvalid: "IDEMPOTENCY_KEY_INVALID";
    /**
     * KeyReused: the key was first used for a different request. Final.
     */
    readonly KeyReused: "IDEMPOTENCY_KEY_REUSED";
    /**
     * KeyForbidden: the key belongs to another caller of the tenant (the
     * server says who the caller is: idem.Config.KeyOwner); nothing of its
     * request or result is revealed, not even whether the arguments are
     * the same. Final.
     */
    readonly KeyForbidden: "IDEMPOTENCY_KEY_FORBIDDEN";
    /**
     * InProgress: another attempt holds the key; retry after
     * extensions.retryAfterSeconds. Retryable.
     */
    readonly InProgress: "IDEMPOTENCY_IN_PROGRESS";
    /**
     * KeyExpired: the key's result is past its retention window; the
     * mutation will not run again for the key. Final.
     */
    readonly KeyExpired: "IDEMPOTENCY_KEY_EXPIRED";
    /**
     * Unavailable: the record store could not be reached; the mutation was
     * not applied. Retryable.
     */
    readonly Unavailable: "IDEMPOTENCY_UNAVAILABLE";
    /**
     * Unauthenticated: the request has no tenant (or one the database
     * cannot store; the example server: X-Tenant-ID missing, or sent
     * twice). Final.
     */
    readonly Unauthenticated: "UNAUTHENTICATED";
    /**
     * RequestTooLarge: the mutation's arguments exceed the hook's limit;
     * nothing was stored or run. Final.
     */
    readonly RequestTooLarge: "IDEMPOTENCY_REQUEST_TOO_LARGE";
    /**
     * ResponseNotStored: the key's mutation ran once, but its result was
     * too large to store, so it cannot be replayed; it will not run again.
     * Final.
     */
    readonly ResponseNotStored: "IDEMPOTENCY_RESPONSE_NOT_STORED";
    /**
     * BadUserInput: the input cannot be stored (it breaks a validator or a
     * constraint of the record's entity, or holds text no database of the
     * server's can store: a NUL character, bytes that are not UTF-8), or
     * an argument could not be read. Nothing was stored or run; the key,
     * if any, was not spent. Final.
     */
    readonly BadUserInput: "BAD_USER_INPUT";
    /**
     * Abandoned: the key's claim was left pending by a client that never
     * came back, and the server could not finish it (the mutation opted
     * out of recovery, or its runs kept failing) before the retention
     * horizon; it will not run again. Final.
     */
    readonly Abandoned: "IDEMPOTENCY_ABANDONED";
    /**
     * InternalServerError: an unexpected error (a database or driver error,
     * a panic); the message is generic and extensions.correlationId names
     * the server's log line with the cause. Also the code of an error the
     * application wrote without a code and did not mark final. In an
     * idempotent mutation the attempt was rolled back and the key released.
     * Retryable.
     */
    readonly InternalServerError: "INTERNAL_SERVER_ERROR";
    /**
     * MutationFailed: an error the application marked final (idem.Final)
     * without a code of its own: stored, and replayed to every retry.
     * Final.
     */
    readonly MutationFailed: "MUTATION_FAILED";
    /**
     * NotFound: what the mutation looked for does not exist, or is another
     * tenant's: ent's not-found error, which a resolver returned without
     * marking it (the application's Config.MapError may answer it
     * otherwise). Stored, and replayed to every retry. Final.
     */
    readonly NotFound: "NOT_FOUND";
    /**
     * BadRequest: the request could not be read as a GraphQL request: a
     * body that is not JSON, a batch (a JSON array of operations, which the
     * server does not take), a method or Content-Type no transport of the
     * server takes. The message never quotes the body. Final.
     */
    readonly BadRequest: "BAD_REQUEST";
    /**
     * BodyTooLarge: the request body is over the limit; refused with HTTP
     * 413 before it was read. Final.
     */
    readonly BodyTooLarge: "REQUEST_BODY_TOO_LARGE";
    /**
     * OperationLimitExceeded: the document is over one of the server's
     * limits (tokens, fields, aliases, depth, fields that share a response name,
     * nodes with fragments expanded); refused before it was validated, and
     * before anything ran. Final.
     */
    readonly OperationLimitExceeded: "OPERATION_LIMIT_EXCEEDED";
    /**
     * ParseFailed: the document is not GraphQL. Final.
     */
    readonly ParseFailed: "GRAPHQL_PARSE_FAILED";
    /**
     * ValidationFailed: the document does not fit the schema, or the
     * variables do not fit the operation. Final.
     */
    readonly ValidationFailed: "GRAPHQL_VALIDATION_FAILED";
    /**
     * ComplexityLimitExceeded: the operation's complexity is over the
     * server's limit. Final.
     */
    readonly ComplexityLimitExceeded: "COMPLEXITY_LIMIT_EXCEEDED";
    /**
     * PersistedQueryNotFound: automatic persisted queries only; the client
     * sends the document with its hash instead of the same request. Final.
     */
    readonly PersistedQueryNotFound: "PERSISTED_QUERY_NOT_FOUND";
    /**
     * InvalidPagination: entgql's, for connection arguments that do not
     * fit (a negative first, say). Final.
     */
    readonly InvalidPagination: "INVALID_PAGINATION";
};
/** One of the codes of {@link Code}. */
export type Code = (typeof Code)[keyof typeof Code];
/** Every code, in idemcode's order. */
export declare const allCodes: readonly Code[];
/**
 * The retryable codes: a retry of the same request, with the same key, may
 * get another answer. Every other code of {@link allCodes} is final.
 */
export declare const retryableCodes: readonly Code[];
