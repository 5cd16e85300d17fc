// @goovo/idem-client: one idempotency key per intent for GraphQL mutations.
// This entry point has no dependency and runs in browsers without a
// bundler; the Apollo link is in "@goovo/idem-client/apollo", the urql
// exchange in "@goovo/idem-client/urql", Node's file storage in
// "@goovo/idem-client/node".
export { allCodes, Code, retryableCodes } from "./codes.js";
export { createFetch, ResponseError, } from "./fetch.js";
export { Intent, IntentDefaults, Intents } from "./intents.js";
export { Header, keyHeaderValue, newKey } from "./key.js";
export { Outcome } from "./wire.js";
export { classify, Defaults, idempotencyReports, isFinalCode, isKnownCode, isReplayed, isRetryableCode, RetriesExhaustedError, } from "./retry.js";
export { defaultStorage, indexedDBStorage, memoryStorage, webStorage, } from "./storage.js";
