package fingerprint

import "strings"

// Describe says what differs, as Differences names it, in a clause for the
// message of IDEMPOTENCY_KEY_REUSED: "selection set differs", "arguments
// differ", "arguments and selection set differ".
func Describe(diffs []string) string {
	verb := "differ"
	if len(diffs) == 1 && diffs[0] != "arguments" {
		verb = "differs"
	}
	return strings.Join(diffs, " and ") + " " + verb
}

// Advice is what the message of IDEMPOTENCY_KEY_REUSED tells the client to
// do about diffs. A request that differs from the key's first one only in
// its selection set is the same action asked again with other fields (a
// resume after a deploy changed the mutation's document): the action may
// have been carried out, and a new key would carry it out again, so the
// advice is to resend the first request. Any other difference is another
// action, which needs a key of its own.
func Advice(diffs []string) string {
	if len(diffs) == 1 && diffs[0] == "selection set" {
		return "the key's action may have been carried out already: resend the request as it was first sent (the same document and variables) to get its result; do not use a new key for it, which would carry it out again"
	}
	return "use a new key for a new intent"
}
