export { allCodes, Code, retryableCodes } from "./codes.js";
export { createFetch, ResponseError, type DevOptions, type FetchOptions, type KeyOptions, type MutationFetch, type MutationRequest, type MutationResult, } from "./fetch.js";
export { Intent, IntentDefaults, Intents, type IntentInit, type IntentsOptions } from "./intents.js";
export { Header, keyHeaderValue, newKey } from "./key.js";
export { Outcome } from "./wire.js";
export { classify, Defaults, idempotencyReports, isFinalCode, isKnownCode, isReplayed, isRetryableCode, RetriesExhaustedError, type FieldReport, type GraphQLBody, type GraphQLErrorLike, type Reason, type Reply, type RetryInfo, type RetryOptions, } from "./retry.js";
export { defaultStorage, indexedDBStorage, memoryStorage, webStorage, type IntentRecord, type IntentRequest, type IntentStorage, type WebStorageLike, } from "./storage.js";
