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
