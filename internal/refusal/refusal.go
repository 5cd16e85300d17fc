// Package refusal makes and renders the hook's refusals (*idemcode.Error):
// the one way a refusal becomes a GraphQL error, and the one rounding of a
// retry delay into seconds (extensions.retryAfterSeconds, Retry-After).
package refusal

import (
	"fmt"
	"math"
	"time"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/goovo/idem/idemcode"
)

// Errorf returns a refusal with code, about key ("" when none was sent).
func Errorf(code idemcode.Code, key, format string, args ...any) *idemcode.Error {
	return &idemcode.Error{Code: code, Key: key, Message: fmt.Sprintf(format, args...)}
}

// GQL renders e for a GraphQL response (the caller places it: path,
// locations).
func GQL(e *idemcode.Error) *gqlerror.Error {
	ext := map[string]any{
		"code":           string(e.Code),
		"idempotencyKey": e.Key,
	}
	if e.Code == idemcode.InProgress {
		ext["retryAfterSeconds"] = RetryAfterSeconds(e.RetryAfter)
	}
	return &gqlerror.Error{Err: e, Message: e.Message, Extensions: ext}
}

// RetryAfterSeconds rounds up, and never tells a client to retry at once
// while a lease is live.
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
