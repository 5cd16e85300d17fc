import { type Exchange, type Operation } from "@urql/core";
import { type DevOptions, type KeyOptions } from "./fetch.js";
import { type RetryOptions } from "./retry.js";
/** The exchange's configuration. */
export interface IdempotencyExchangeOptions extends RetryOptions, KeyOptions, DevOptions {
    /**
     * Whether a mutation is idempotent: sent by this exchange, with a key,
     * and retried. Default: with keyIn "variable", the mutations that declare
     * the key variable; with keyIn "header", every mutation. The others go on
     * to the next exchange.
     */
    isIdempotent?: (operation: Operation) => boolean;
}
/**
 * An exchange, placed before fetchExchange, that sends urql's idempotent
 * mutations itself: with the intent of the operation's context (or, without
 * one, a key for this call only and a warning in development), recorded in
 * the intent's storage before the first attempt, retried with the same key
 * and body after network failures, HTTP 429/502/503/504 and the retryable
 * codes, waiting as the server asks. It reads the client's url,
 * fetchOptions (headers) and fetch from the operation's context, as
 * fetchExchange does.
 *
 * ```js
 * const client = new Client({
 *   url: "/query",
 *   exchanges: [cacheExchange, idempotencyExchange(), fetchExchange],
 * });
 * const intent = await intents.create({ name: "pay" });
 * const result = await client.mutation(PAY, variables, { intent }).toPromise();
 * isReplayed(result.extensions);
 * ```
 */
export declare function idempotencyExchange(options?: IdempotencyExchangeOptions): Exchange;
