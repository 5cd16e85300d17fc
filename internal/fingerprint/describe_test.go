package fingerprint

import "testing"

func TestDescribeAgrees(t *testing.T) {
	for _, c := range []struct {
		diffs []string
		want  string
	}{
		{[]string{"selection set"}, "selection set differs"},
		{[]string{"arguments"}, "arguments differ"},
		{[]string{"mutation (first used for createOrder)"}, "mutation (first used for createOrder) differs"},
		{[]string{"arguments", "selection set"}, "arguments and selection set differ"},
		{[]string{"request"}, "request differs"},
	} {
		if got := Describe(c.diffs); got != c.want {
			t.Errorf("Describe(%q) = %q, want %q", c.diffs, got, c.want)
		}
	}
}
