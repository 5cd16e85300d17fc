import type { IntentStorage } from "./storage.js";
/**
 * Keeps intent records in one JSON file, written whole to a temporary file
 * and renamed over the old one, so that a crash leaves the old file or the
 * new one, never half of one. Writes of one storage are serialised; two
 * processes must not share a file.
 */
export declare function fileStorage(path: string): IntentStorage;
