package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of /proc's CPU times (100 on
// every common architecture).
const clockTicks = 100

// cpuTimes are CPU seconds used so far: by the servers, by this tool, by
// each PostgreSQL process (by pid), and by the whole machine (busy and in
// all).
type cpuTimes struct {
	servers, tool, busy, total float64
	postgres                   map[string]float64
	at                         time.Time
}

// readCPU reads /proc (Linux only; elsewhere the figures stay zero).
func readCPU(serverPIDs []int) cpuTimes {
	c := cpuTimes{at: time.Now(), postgres: map[string]float64{}}
	for _, pid := range serverPIDs {
		c.servers += procCPU(strconv.Itoa(pid))
	}
	c.tool = procCPU("self")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if comm, err := os.ReadFile(filepath.Join(d, "comm")); err == nil && strings.TrimSpace(string(comm)) == "postgres" {
			c.postgres[filepath.Base(d)] = procCPU(filepath.Base(d))
		}
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		for i, f := range strings.Fields(line)[1:] {
			v, _ := strconv.ParseFloat(f, 64)
			c.total += v / clockTicks
			if i != 3 && i != 4 { // idle, iowait
				c.busy += v / clockTicks
			}
		}
	}
	return c
}

// procCPU returns the user and system CPU seconds of a process.
func procCPU(pid string) float64 {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0
	}
	// The command name (field 2) may contain spaces; fields count from
	// the parenthesis that closes it.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks
}

// cpuShare describes how the machine's CPU was spent between two readings,
// in cores: the servers, the PostgreSQL backends serving them (backends,
// by pid; a backend started in between counts from zero), this tool (the
// clients), everything else (PostgreSQL's shared background processes
// among it), and idle.
func cpuShare(a, b cpuTimes, backends map[string]bool) string {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 || b.total == 0 {
		return "unknown"
	}
	pg := 0.0
	for pid := range backends {
		pg += b.postgres[pid] - a.postgres[pid]
	}
	cores := (b.total - a.total) / wall
	servers, tool := (b.servers-a.servers)/wall, (b.tool-a.tool)/wall
	pg /= wall
	busy := (b.busy - a.busy) / wall
	return fmt.Sprintf("servers %.2f, their PostgreSQL backends %.2f, load tool %.2f, other %.2f, idle %.2f (cores, of %.0f)",
		servers, pg, tool, max(0, busy-servers-pg-tool), max(0, cores-busy), cores)
}
