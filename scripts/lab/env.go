package lab

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Env is the machine record every results folder's env.txt holds (issue
// 36): what the CPU is (name, family, model, stepping, microcode), what
// the kernel makes each entry pay (its mitigations), which Go and commit
// ran, and how busy the machine was, steal included, at start and end.
// This VM's CPU model and mitigations change between sessions, so a
// figure without them cannot be compared with another.
type Env struct {
	Root string // the repository, for the commit; "" skips it
}

// Write writes env.txt's lines to w: the machine and a load snapshot
// named when ("start" or "end"). Steal here is the share of all CPU time
// since boot that the hypervisor took (/proc/stat); a run's own steal is
// in its meters' rows.
func (e Env) Write(w io.Writer, when string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "date: %s\n", time.Now().Format(time.RFC3339))
	if e.Root != "" {
		commit := strings.TrimSpace(run(e.Root, "git", "rev-parse", "HEAD"))
		changed := 0
		for _, l := range strings.Split(run(e.Root, "git", "status", "--porcelain", "--", ".", ":!results"), "\n") {
			if strings.TrimSpace(l) != "" {
				changed++
			}
		}
		fmt.Fprintf(&b, "commit: %s (%d files changed in the work tree)\n", commit, changed)
	}
	cpu := cpuInfo()
	for _, k := range [][2]string{{"model name", "cpu"}, {"cpu family", "cpu family"}, {"model", "cpu model"},
		{"stepping", "cpu stepping"}, {"microcode", "cpu microcode"}} {
		v, ok := cpu[k[0]]
		if !ok {
			v = "not exposed by /proc/cpuinfo"
		}
		fmt.Fprintf(&b, "%s: %s\n", k[1], v)
	}
	fmt.Fprintf(&b, "cores: %d\n", runtime.NumCPU())
	fmt.Fprintf(&b, "kernel: %s\n", strings.TrimSpace(run("", "uname", "-srm")))
	var affected []string
	files, _ := filepath.Glob("/sys/devices/system/cpu/vulnerabilities/*")
	for _, f := range files {
		v, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(v))
		if s != "Not affected" {
			affected = append(affected, filepath.Base(f)+": "+s)
		}
	}
	if len(affected) == 0 {
		affected = []string{"none reported"}
	}
	fmt.Fprintf(&b, "mitigations: %s\n", strings.Join(affected, " | "))
	fmt.Fprintf(&b, "go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	e.WriteLoad(&b, when)
	_, err := w.Write(b.Bytes())
	return err
}

// WriteLoad writes the load average and the steal share since boot at
// when, the two lines a run adds again at its end.
func (Env) WriteLoad(w io.Writer, when string) {
	la, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(la))
	if len(f) >= 3 {
		fmt.Fprintf(w, "load average at %s (1, 5, 15 min): %s %s %s\n", when, f[0], f[1], f[2])
	}
	if t, err := ReadCPUTimes(); err == nil {
		if all := t.Total(); all.Sum() > 0 {
			fmt.Fprintf(w, "steal at %s (since boot): %.2f%% of CPU time\n", when, 100*float64(all.Steal)/float64(all.Sum()))
		}
	}
}

func run(dir, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return string(out)
}

// cpuInfo is the first processor's block of /proc/cpuinfo.
func cpuInfo() map[string]string {
	m := map[string]string{}
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break
		}
		k, v, ok := strings.Cut(line, ":")
		if ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// CPUTime is one line of /proc/stat in clock ticks (USER_HZ).
type CPUTime struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// Busy is the time the CPU ran anything, softirq included, steal not.
func (c CPUTime) Busy() uint64 { return c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ }

// Sum is every tick, idle and steal included.
func (c CPUTime) Sum() uint64 { return c.Busy() + c.Idle + c.IOWait + c.Steal }

// Sub is c - o, field by field.
func (c CPUTime) Sub(o CPUTime) CPUTime {
	return CPUTime{c.User - o.User, c.Nice - o.Nice, c.System - o.System, c.Idle - o.Idle,
		c.IOWait - o.IOWait, c.IRQ - o.IRQ, c.SoftIRQ - o.SoftIRQ, c.Steal - o.Steal}
}

// CPUTimes is /proc/stat's per-CPU lines, by CPU number.
type CPUTimes []CPUTime

// Add is c + o, field by field.
func (c CPUTime) Add(o CPUTime) CPUTime {
	return CPUTime{c.User + o.User, c.Nice + o.Nice, c.System + o.System, c.Idle + o.Idle,
		c.IOWait + o.IOWait, c.IRQ + o.IRQ, c.SoftIRQ + o.SoftIRQ, c.Steal + o.Steal}
}

// Total is the sum over every CPU.
func (t CPUTimes) Total() CPUTime {
	var s CPUTime
	for _, c := range t {
		s = s.Add(c)
	}
	return s
}

// Since is the time every CPU in both t and before spent since before,
// summed over those CPUs.
func (t CPUTimes) Since(before CPUTimes) CPUTime {
	var d CPUTime
	for i := range min(len(t), len(before)) {
		d = d.Add(t[i].Sub(before[i]))
	}
	return d
}

// ReadCPUTimes reads /proc/stat's cpuN lines.
func ReadCPUTimes() (CPUTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	return parseCPUTimes(b)
}

func parseCPUTimes(b []byte) (CPUTimes, error) {
	var t CPUTimes
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "cpu") || strings.HasPrefix(line, "cpu ") {
			continue
		}
		var n int
		var c CPUTime
		if _, err := fmt.Sscanf(line, "cpu%d %d %d %d %d %d %d %d %d", &n, &c.User, &c.Nice, &c.System, &c.Idle,
			&c.IOWait, &c.IRQ, &c.SoftIRQ, &c.Steal); err != nil {
			return nil, fmt.Errorf("/proc/stat: %q: %v", line, err)
		}
		for len(t) <= n {
			t = append(t, CPUTime{})
		}
		t[n] = c
	}
	if len(t) == 0 {
		return nil, fmt.Errorf("/proc/stat: no cpuN lines")
	}
	return t, nil
}
