// Keys and the HTTP form they travel in.
import { Header as wire } from "./wire.js";
const base32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
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
export function newKey() {
    const bytes = new Uint8Array(26);
    globalThis.crypto.getRandomValues(bytes);
    let key = "";
    for (const b of bytes)
        key += base32[b & 31];
    return key;
}
/**
 * The value of the `Idempotency-Key` header for key: a structured-field
 * string (RFC 8941), as the IETF draft asks: `"key"`, with `"` and `\`
 * escaped. The quotes are not part of the key.
 */
export function keyHeaderValue(key) {
    return `"${key.replace(/[\\"]/g, "\\$&")}"`;
}
/** HTTP header names of the protocol (their names come from Go's idemcode). */
export const Header = {
    /** Carries the key when the client sends it in a header (`keyIn: "header"`). */
    Key: wire.Key,
    /**
     * Numbers the retries of one send (1 on the second attempt); the first
     * attempt does not carry it. The server then looks the key up before
     * claiming it, the cheaper way for a retry that reaches another server
     * process. A hint: the answer is the same without it.
     */
    Retry: wire.Retry,
    /** "true" on a response in which every idempotent field was replayed. */
    Replayed: wire.Replayed,
};
