package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twinloop/twinloop/scripts/lab"
)

// clkTck is USER_HZ, the unit of /proc/stat and /proc/PID/stat.
var clkTck = func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if v, err2 := strconv.ParseFloat(strings.TrimSpace(string(out)), 64); err == nil && err2 == nil && v > 0 {
		return v
	}
	return 100
}()

// procTicks is utime+stime of the processes (all their threads), in
// clock ticks, from /proc/PID/stat fields 14 and 15.
func procTicks(pids []int) uint64 {
	var total uint64
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(b)
		// The command name may hold spaces and parentheses.
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 12 {
			u, _ := strconv.ParseUint(f[11], 10, 64)
			st, _ := strconv.ParseUint(f[12], 10, 64)
			total += u + st
		}
	}
	return total
}

// ctxSwitches is the voluntary and involuntary context switches of every
// thread of the processes.
func ctxSwitches(pids []int) uint64 {
	var n uint64
	for _, p := range pids {
		files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", p))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for _, l := range strings.Split(string(b), "\n") {
				if k, v, ok := strings.Cut(l, ":"); ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
					x, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
					n += x
				}
			}
		}
	}
	return n
}

// peakRSSKB is the processes' VmHWM, summed (nginx's master and workers
// together, as their CPU time is).
func peakRSSKB(pids []int) uint64 {
	var total uint64
	for _, p := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				x, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				total += x
			}
		}
	}
	return total
}

// quiesce waits (up to 3 s) until the processes stop using CPU, so that
// a run's leftovers (closes, connections wrk gave up on) are not charged
// to the next.
func quiesce(pids []int) {
	prev := procTicks(pids)
	for i := 0; i < 30; i++ {
		time.Sleep(100 * time.Millisecond)
		cur := procTicks(pids)
		if cur == prev {
			return
		}
		prev = cur
	}
}

// quietWait waits, up to limit, until the machine is idle: every CPU
// together busy under 5% of one CPU over half a second. The server under
// test is idle then (quiesce), so what is busy is someone else, whose
// CPU the whole-machine figure would charge to the server. It returns
// how long it waited. It gives up when ctx is done (the run is being
// stopped).
func quietWait(ctx context.Context, limit time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < limit && ctx.Err() == nil {
		t0, err := lab.ReadCPUTimes()
		time.Sleep(500 * time.Millisecond)
		t1, err2 := lab.ReadCPUTimes()
		if err != nil || err2 != nil {
			break
		}
		if busy := t1.Since(t0).Busy(); float64(busy) < 0.05*0.5*clkTck {
			break
		}
	}
	w := time.Since(start) - 500*time.Millisecond
	if w < 0 {
		w = 0
	}
	return w
}

// meter is one measured window: every CPU from /proc/stat, and the
// server's own CPU time and context switches.
type meter struct {
	pids  []int
	cpu   lab.CPUTimes
	ticks uint64
	cs    uint64
}

func startMeter(pids []int) (*meter, error) {
	t, err := lab.ReadCPUTimes()
	if err != nil {
		return nil, err
	}
	return &meter{pids: pids, cpu: t, ticks: procTicks(pids), cs: ctxSwitches(pids)}, nil
}

// stop ends the window and returns its figures per request as rounds.csv
// columns (µs as %.2f): the whole machine's busy CPU (softirq included:
// on loopback the server's receive path runs there, on the client's
// CPU), softirq alone, the server's utime+stime, the load generator's
// (client, from its rusage), the server's context switches, and the
// hypervisor's steal as a share of the window's CPU time.
func (m *meter) stop(requests int64, client time.Duration) ([]string, error) {
	t, err := lab.ReadCPUTimes()
	if err != nil {
		return nil, err
	}
	d := t.Since(m.cpu)
	ticks := procTicks(m.pids) - m.ticks
	cs := ctxSwitches(m.pids) - m.cs
	set := []string{}
	if d.Sum() > 0 {
		set = append(set, fmt.Sprintf("steal_pct=%.2f", 100*float64(d.Steal)/float64(d.Sum())))
	}
	if requests > 0 {
		us := func(ticks uint64) string { return fmt.Sprintf("%.2f", float64(ticks)*1e6/clkTck/float64(requests)) }
		set = append(set, "machine_cpu_us_per_req="+us(d.Busy()), "softirq_us_per_req="+us(d.SoftIRQ),
			"cpu_us_per_req="+us(ticks),
			fmt.Sprintf("client_cpu_us_per_req=%.2f", float64(client.Microseconds())/float64(requests)),
			fmt.Sprintf("cs_per_req=%.4f", float64(cs)/float64(requests)))
	}
	return set, nil
}
