package idemhttp

import "testing"

// Only a positive integer marks a request as a retry: anything else is no
// hint, and the request claims first as usual.
func TestRetryHeader(t *testing.T) {
	for v, want := range map[string]bool{
		"1": true, "7": true, "100": true,
		"": false, "0": false, "-1": false, "+1": false, "x": false, "1.5": false, " 1": false, "99999999999": false,
	} {
		if got := isRetry(v); got != want {
			t.Errorf("isRetry(%q) = %v, want %v", v, got, want)
		}
	}
}
