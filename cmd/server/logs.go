package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
)

// newLogger returns the server's logger: format text (logfmt) or json, at
// level and above (verbose: debug, as -v always did).
func newLogger(w io.Writer, format, level string, verbose bool) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level %q: want debug, info, warn or error", level)
	}
	if verbose {
		lv = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format %q: want text or json", format)
}

// logConfiguration logs every flag's effective value in one line, so that
// the log of a run says how it was started; a URL's password is masked.
func logConfiguration(logger *slog.Logger) {
	var attrs []any
	flag.VisitAll(func(f *flag.Flag) {
		v := f.Value.String()
		if u, err := url.Parse(v); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
				v = u.String()
			}
		}
		attrs = append(attrs, slog.String(strings.ReplaceAll(f.Name, "-", "_"), v))
	})
	logger.Info("configuration", slog.Group("flags", attrs...))
}

// riverLogger is the logger handed to River: its lines one level lower
// (its info, such as the producers' job counts every few seconds, at
// debug; its warnings at info), so that they do not drown the server's
// own at -log-level info, and tagged component=river.
func riverLogger(l *slog.Logger) *slog.Logger {
	return slog.New(lowered{l.Handler()}).With(slog.String("component", "river"))
}

// lowered logs each record one level lower than it came (error stays
// error).
type lowered struct{ slog.Handler }

func lower(l slog.Level) slog.Level {
	if l >= slog.LevelError {
		return l
	}
	return l - 4
}

func (h lowered) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, lower(l))
}

func (h lowered) Handle(ctx context.Context, r slog.Record) error {
	r.Level = lower(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h lowered) WithAttrs(attrs []slog.Attr) slog.Handler {
	return lowered{h.Handler.WithAttrs(attrs)}
}

func (h lowered) WithGroup(name string) slog.Handler {
	return lowered{h.Handler.WithGroup(name)}
}
