import { ApolloLink, Observable, type ApolloClient, type OperationVariables } from "@apollo/client";
import { type DevOptions, type KeyOptions } from "./fetch.js";
import { type Intent } from "./intents.js";
import { type RetryOptions } from "./retry.js";
declare module "@apollo/client" {
    interface DefaultContext {
        /**
         * The intent a mutation carries out (IdempotencyLink): its key is sent
         * with every attempt, and the intent is settled by the final answer.
         */
        intent?: Intent;
    }
}
/** The link's configuration. */
export interface IdempotencyLinkOptions extends RetryOptions, KeyOptions, DevOptions {
    /**
     * Whether a mutation is idempotent: sent with a key and retried. Default:
     * with keyIn "variable", the mutations that declare the key variable;
     * with keyIn "header", every mutation.
     */
    isIdempotent?: (operation: ApolloLink.Operation) => boolean;
}
/**
 * A non-terminating link, placed before the HttpLink, that makes Apollo
 * Client's mutations retry-safe. Pass the intent in the mutation's context;
 * without one a mutation gets a key for this call only, with a warning in
 * development.
 *
 * ```js
 * const client = new ApolloClient({
 *   cache: new InMemoryCache(),
 *   link: ApolloLink.from([new IdempotencyLink(), new HttpLink({ uri: "/query" })]),
 * });
 * const intent = await intents.create({ name: "pay" });
 * const { data, extensions } = await client.mutate({ mutation: PAY, variables, context: { intent } });
 * isReplayed(extensions);
 * ```
 *
 * Every attempt goes down the rest of the chain (forward) with the same key
 * and variables, and `Idempotency-Retry` on retries. Network failures, HTTP
 * 429/502/503/504 (Apollo's ServerError) and the retryable codes are
 * retried, as the server asks (`Retry-After`, `retryAfterSeconds`) or with
 * jittered backoff; the final answer reaches Apollo as the HttpLink gave it.
 */
export declare class IdempotencyLink extends ApolloLink {
    #private;
    constructor(options?: IdempotencyLinkOptions);
    request(operation: ApolloLink.Operation, forward: ApolloLink.ForwardFunction): Observable<ApolloLink.Result>;
}
/**
 * Sends an unfinished intent's recorded request again through client (whose
 * link chain has an {@link IdempotencyLink}), with its key: the document and
 * variables as they were first sent, not the app's current mutation, which a
 * deploy may have changed since. After a reload the server runs the
 * request if no earlier attempt did, or replays that attempt's result.
 *
 * ```js
 * for (const intent of await intents.list({ name: "pay" })) {
 *   if (intent.sent) await resumeMutation(client, intent);
 * }
 * ```
 */
export declare function resumeMutation<TData = unknown>(client: ApolloClient, intent: Intent, options?: Omit<ApolloClient.MutateOptions<TData, OperationVariables>, "mutation" | "variables">): Promise<ApolloClient.MutateResult<TData>>;
