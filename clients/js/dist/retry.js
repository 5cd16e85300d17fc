// The retry loop every transport shares: when an answer is final for the
// intent, when it is worth another attempt with the same key, and how long
// to wait. It mirrors Go's idemclient.Client.Do.
import { allCodes, Code, retryableCodes } from "./codes.js";
import { Header } from "./key.js";
import { Outcome } from "./wire.js";
/** Defaults of {@link RetryOptions}. */
export const Defaults = {
    /** Attempts of one send, the first included: the first and seven retries. */
    maxAttempts: 8,
    /** Backoff ceiling of the first retry, in milliseconds. */
    baseBackoff: 100,
    /** Bound of every wait between two attempts, in milliseconds. */
    maxBackoff: 5000,
    /** The GraphQL variable that carries the key. */
    keyVariable: "key",
};
/**
 * The error a send ends with when its last attempt still asked for a
 * retry. The intent may or may not have been carried out: it stays
 * unfinished in its storage, to be sent again later with the same key.
 */
export class RetriesExhaustedError extends Error {
    name = "RetriesExhaustedError";
    /** The key of the send. */
    key;
    /** Attempts made. */
    attempts;
    /** Why the last attempt asked for a retry. */
    reason;
    /** The last reply received, if any. */
    reply;
    constructor(key, attempts, reason, detail, reply, cause) {
        super(`idem: retries exhausted after ${attempts} attempts, the last one: ${detail}; ` +
            `the intent may or may not have been carried out: send it again later with the same key`, cause === undefined ? undefined : { cause });
        this.key = key;
        this.attempts = attempts;
        this.reason = reason;
        this.reply = reply;
    }
}
const known = new Set(allCodes);
const retryable = new Set(retryableCodes);
/** Whether code is one of the codes an idem server answers with ({@link allCodes}). */
export function isKnownCode(code) {
    return known.has(code);
}
/**
 * Whether a retry of the same request, with the same key, may get another
 * answer than code: IDEMPOTENCY_IN_PROGRESS, IDEMPOTENCY_UNAVAILABLE and
 * INTERNAL_SERVER_ERROR.
 */
export function isRetryableCode(code) {
    return retryable.has(code);
}
/** Whether code is a known code that no retry of the same request changes. */
export function isFinalCode(code) {
    return known.has(code) && !retryable.has(code);
}
/** The idempotency reports of a response's extensions, by response name. */
export function idempotencyReports(extensions) {
    const v = extensions?.["idempotency"];
    return v && typeof v === "object" ? v : {};
}
/**
 * Whether every idempotent field of a response was replayed from an
 * earlier request's stored result, from its extensions (`result.extensions`
 * of Apollo's mutate and of urql's results), or, given the response's
 * headers, from `Idempotent-Replayed: true`.
 */
export function isReplayed(extensions, headers) {
    if (headers?.get(Header.Replayed)?.toLowerCase() === "true")
        return true;
    const reports = Object.values(idempotencyReports(extensions));
    return reports.length > 0 && reports.every((r) => r.outcome === Outcome.Replayed);
}
/**
 * Reads one reply: the reason to retry it, or none when it is final. A
 * final code wins over the retryable signals of other fields: no retry
 * changes it.
 */
export function classify(reply) {
    const { status, body } = reply;
    if (status === 429 || status === 502 || status === 503 || status === 504) {
        return { reason: "http-status", hint: retryAfterHeader(reply.headers) };
    }
    if (!body)
        return { hint: 0 };
    let reason;
    let code;
    let hint = 0;
    for (const e of body.errors ?? []) {
        const c = typeof e?.extensions?.["code"] === "string" ? e.extensions["code"] : "";
        if (isFinalCode(c))
            return { hint: 0 };
        if (c === Code.InProgress) {
            reason = "in-progress";
            code = c;
            const s = e.extensions?.["retryAfterSeconds"];
            if (typeof s === "number" && s >= 0)
                hint = Math.max(hint, s * 1000);
        }
        else if (c === Code.Unavailable) {
            if (reason !== "in-progress") {
                reason = "unavailable";
                code = c;
            }
        }
        else if (isRetryableCode(c) && code === undefined) {
            code = c;
        }
    }
    if (reason === "in-progress")
        hint = Math.max(hint, retryAfterHeader(reply.headers));
    if (reason)
        return { reason, code, hint };
    for (const r of Object.values(idempotencyReports(body.extensions))) {
        if (r?.outcome === Outcome.Released)
            return { reason: "released", hint };
    }
    if (code !== undefined)
        return { reason: "retryable", code, hint };
    return { hint };
}
/** A response body as a GraphQL response, or undefined when it is not one. */
export function parseBody(text) {
    try {
        const v = JSON.parse(text);
        return v && typeof v === "object" && ("data" in v || "errors" in v) ? v : undefined;
    }
    catch {
        return undefined;
    }
}
/** Retry-After in milliseconds: seconds or an HTTP date; 0 if absent. */
function retryAfterHeader(headers) {
    const v = headers?.get("Retry-After")?.trim();
    if (!v)
        return 0;
    if (/^\d+$/.test(v))
        return Number(v) * 1000;
    const t = Date.parse(v);
    return Number.isNaN(t) ? 0 : Math.max(0, t - Date.now());
}
/** The wait after attempt n (1-based) failed: full jitter, or the server's longer hint; both capped at maxBackoff. */
export function backoff(n, hint, opts) {
    const base = opts.baseBackoff && opts.baseBackoff > 0 ? opts.baseBackoff : Defaults.baseBackoff;
    const max = opts.maxBackoff && opts.maxBackoff > 0 ? opts.maxBackoff : Defaults.maxBackoff;
    const ceiling = Math.min(max, base * 2 ** Math.min(n - 1, 30));
    let d = Math.random() * ceiling;
    if (hint > 0)
        d = Math.max(d, Math.min(hint, max));
    return Math.round(d);
}
function attemptTimeout(n, opts) {
    let t = opts.attemptTimeout ?? 0;
    if (t <= 0)
        return 0;
    const max = opts.maxAttemptTimeout ?? 0;
    if (max > t)
        t = Math.min(max, t * 2 ** Math.min(n - 1, 30));
    return t;
}
/** The error of a send given up because its signal was aborted. */
function aborted(signal) {
    return signal.reason ?? new DOMException("The operation was aborted.", "AbortError");
}
function sleep(ms, signal) {
    return new Promise((resolve, reject) => {
        if (signal?.aborted)
            return reject(aborted(signal));
        const done = () => {
            signal?.removeEventListener("abort", stop);
            resolve();
        };
        const timer = setTimeout(done, ms);
        const stop = () => {
            clearTimeout(timer);
            reject(aborted(signal));
        };
        signal?.addEventListener("abort", stop, { once: true });
    });
}
/**
 * Runs attempt until its answer is final for the intent, maxAttempts
 * attempts were made, or signal is aborted. An attempt that throws failed
 * in transit ("network", or "timeout" when attemptTimeout ended it); one
 * that returns is classified by {@link classify}. The attempt's own signal
 * is aborted when the attempt times out or signal is aborted.
 *
 * Throws {@link RetriesExhaustedError}, or signal's reason.
 */
export async function settle(key, attempt, opts) {
    const { signal } = opts;
    const max = opts.maxAttempts && opts.maxAttempts > 0 ? opts.maxAttempts : Defaults.maxAttempts;
    for (let n = 1;; n++) {
        if (signal?.aborted)
            throw aborted(signal);
        const ac = new AbortController();
        const onAbort = () => ac.abort(aborted(signal));
        signal?.addEventListener("abort", onAbort, { once: true });
        let timedOut = false;
        const limit = attemptTimeout(n, opts);
        const timer = limit > 0
            ? setTimeout(() => {
                timedOut = true;
                ac.abort(new DOMException(`attempt ${n} ran out of time (${limit} ms)`, "TimeoutError"));
            }, limit)
            : undefined;
        let answer;
        let verdict;
        let error;
        try {
            answer = await attempt(n, ac.signal);
            verdict = classify(answer.reply);
        }
        catch (e) {
            if (signal?.aborted)
                throw aborted(signal);
            error = e;
            verdict = { reason: timedOut ? "timeout" : "network", hint: 0 };
        }
        finally {
            clearTimeout(timer);
            signal?.removeEventListener("abort", onAbort);
        }
        const reason = verdict.reason;
        if (!reason)
            return { ...answer, attempts: n };
        const status = answer?.reply.status ?? 0;
        if (n >= max) {
            const detail = error !== undefined ? `${reason}: ${String(error)}` : verdict.code ? `${reason} (${verdict.code})` : `${reason} (HTTP ${status})`;
            throw new RetriesExhaustedError(key, n, reason, detail, answer?.reply, error);
        }
        const delay = backoff(n, verdict.hint, opts);
        opts.onRetry?.({ key, attempt: n, reason, status, code: verdict.code, error, delay });
        await sleep(delay, signal);
    }
}
