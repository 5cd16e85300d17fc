package idem

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The recoverer's identity settings are checked together, and each error
// names the fields at fault: Caller needs CallerContext, CallerContext
// replaces TenantContext, and RecoverAfter needs one of the two.
func TestConfigOfTheRecoverersCaller(t *testing.T) {
	tenant := func(context.Context) (string, error) { return "t", nil }
	tenantContext := func(ctx context.Context, _ string) context.Context { return ctx }
	caller := func(context.Context) []byte { return nil }
	callerContext := func(ctx context.Context, _ string, _ []byte) (context.Context, error) { return ctx, nil }
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" : accepted (the next check, the Backend, fails)
	}{
		{"tenant only", Config{RecoverAfter: time.Second, TenantContext: tenantContext}, ""},
		{"caller", Config{RecoverAfter: time.Second, Caller: caller, CallerContext: callerContext}, ""},
		{"caller without recovering here", Config{Caller: caller, CallerContext: callerContext}, ""},
		{"neither", Config{RecoverAfter: time.Second}, "Config.TenantContext (or Config.CallerContext) is required with Config.RecoverAfter"},
		{"caller alone", Config{Caller: caller, TenantContext: tenantContext}, "Config.Caller needs Config.CallerContext"},
		{"both contexts", Config{TenantContext: tenantContext, CallerContext: callerContext}, "Config.CallerContext replaces Config.TenantContext"},
	} {
		tc.cfg.Tenant = tenant
		_, err := tc.cfg.withDefaults()
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), "Config.Backend") {
				t.Errorf("%s: %v, want it accepted (then the missing Backend refused)", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The recoverer is on by default for an app that can run a claim as its
// caller (TenantContext or CallerContext set, as the guide's app does),
// off without, and RecoverNever (any negative value) turns it off.
func TestRecovererIsOnByDefault(t *testing.T) {
	tenantContext := func(ctx context.Context, _ string) context.Context { return ctx }
	callerContext := func(ctx context.Context, _ string, _ []byte) (context.Context, error) { return ctx, nil }
	for _, tc := range []struct {
		name string
		cfg  Config
		want time.Duration
	}{
		{"tenant context", Config{TenantContext: tenantContext}, DefaultRecoverAfter},
		{"caller context", Config{CallerContext: callerContext}, DefaultRecoverAfter},
		{"set", Config{TenantContext: tenantContext, RecoverAfter: time.Minute}, time.Minute},
		{"turned off", Config{TenantContext: tenantContext, RecoverAfter: RecoverNever}, RecoverNever},
		{"any negative", Config{TenantContext: tenantContext, RecoverAfter: -time.Second}, RecoverNever},
		{"no way to act as the caller", Config{}, RecoverNever},
	} {
		// The recoverer's settings are completed before the Backend,
		// which these configurations lack, is refused.
		c, _ := tc.cfg.withDefaults()
		if c.RecoverAfter != tc.want {
			t.Errorf("%s: RecoverAfter %v, want %v", tc.name, c.RecoverAfter, tc.want)
		}
	}
}
