/**
 * Returns a fresh idempotency key: 26 characters of base32 (130 bits from
 * the platform's cryptographic random source), printable ASCII as the server
 * requires; the same form as Go's idemclient.NewKey. Keys are made by
 * {@link Intents.create}: one per intent, when the intent is born, never
 * one per call.
 *
 * It uses `crypto.getRandomValues`, which browsers offer on plain HTTP pages
 * too (unlike `crypto.randomUUID`, which a page served from another host
 * than localhost over HTTP does not have).
 */
export declare function newKey(): string;
/**
 * The value of the `Idempotency-Key` header for key: a structured-field
 * string (RFC 8941), as the IETF draft asks: `"key"`, with `"` and `\`
 * escaped. The quotes are not part of the key.
 */
export declare function keyHeaderValue(key: string): string;
/** HTTP header names of the protocol (their names come from Go's idemcode). */
export declare const Header: {
    /** Carries the key when the client sends it in a header (`keyIn: "header"`). */
    readonly Key: "Idempotency-Key";
    /**
     * Numbers the retries of one send (1 on the second attempt); the first
     * attempt does not carry it. The server then looks the key up before
     * claiming it, the cheaper way for a retry that reaches another server
     * process. A hint: the answer is the same without it.
     */
    readonly Retry: "Idempotency-Retry";
    /** "true" on a response in which every idempotent field was replayed. */
    readonly Replayed: "Idempotent-Replayed";
};
