package idemctl

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// stamp writes t as RFC 3339 in UTC, "-" for none.
func stamp(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// stampAgo writes t and how long ago it was (or how soon it will be).
func stampAgo(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return stamp(t) + " (" + relative(*t, now) + ")"
}

func relative(t, now time.Time) string {
	if d := now.Sub(t); d >= 0 {
		return human(d) + " ago"
	}
	return "in " + human(t.Sub(now))
}

// human writes a duration for people: 850ms, 4.2s, 42s, 3m12s, 5h3m, 3d4h.
func human(d time.Duration) string {
	if d < 0 {
		return "-" + human(-d)
	}
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return trimZero(fmt.Sprintf("%dm%ds", d/time.Minute, d%time.Minute/time.Second))
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		return trimZero(fmt.Sprintf("%dh%dm", d/time.Hour, d%time.Hour/time.Minute))
	default:
		d = d.Round(time.Hour)
		return trimZero(fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour))
	}
}

// trimZero drops a zero second unit: 5h0m becomes 5h.
func trimZero(s string) string {
	for _, unit := range []string{"0s", "0m", "0h"} {
		if strings.HasSuffix(s, unit) && len(s) > len(unit) && (s[len(s)-len(unit)-1] < '0' || s[len(s)-len(unit)-1] > '9') {
			return strings.TrimSuffix(s, unit)
		}
	}
	return s
}

// size writes a number of bytes: 512 B, 4.1 KiB, 12.3 MiB.
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// rate writes records per second.
func rate(n int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(n) / elapsed.Seconds()
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() { _ = t.tw.Flush() }

// clip shortens s to n runes.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
