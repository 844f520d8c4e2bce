package lab

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// The summary.md of a make kentry folder (scripts/kentry -dir), here so
// that scripts/plot can rewrite it for make study too: a mode
// {flag: "kentry", file: "bench.txt", read: lab.IsKentry, run:
// lab.WriteKentrySummary}, added with the first committed kentry folder
// (study_test.go pins one folder per mode).

// row is one benchmark of summary.md's table: its name in bench.txt
// (without "Benchmark" and the GOMAXPROCS suffix) and what it times.
type kentryRow struct{ name, what string }

// kentryRows is the table's order and wording.
var kentryRows = []kentryRow{
	{"GetppidRaw", "getppid(2) by syscall.RawSyscall: the bare kernel entry and exit"},
	{"GetppidSyscall", "getppid(2) by syscall.Syscall: the same with the runtime's entersyscall/exitsyscall"},
	{"EpollWaitIdle", "epoll_wait(2), zero timeout, one idle TCP socket registered, no event"},
	{"UringEnterEmpty", "io_uring_enter(2) with GETEVENTS, nothing to submit, nothing to wait for"},
	{"UringNop", "IORING_OP_NOP: submitted and its CQE reaped in one enter (min_complete 1)"},
	{"WriteRead1BUnix", "write(2) of 1 byte and read(2) of it, AF_UNIX socket pair"},
	{"WriteRead1BTCP", "write(2) of 1 byte and read(2) of it, TCP over 127.0.0.1"},
	{"SendfileRead1500TCP", "sendfile(2) of 1,500 B from a page-cached file, TCP over 127.0.0.1, drained by read(2)"},
	{"WriteRead1500TCP", "write(2) of the same 1,500 B from memory, drained by read(2)"},
	{"Read1500TCP", "read(2) of 1,500 B already received, alone"},
}

// kentryDifferences are summary.md's second table: one row less another,
// paired round by round (the k-th result of each).
var kentryDifferences = []struct{ a, b, what string }{
	{"GetppidSyscall", "GetppidRaw", "the runtime's entersyscall/exitsyscall around a call"},
	{"SendfileRead1500TCP", "Read1500TCP", "sendfile(2) of 1,500 B to TCP, less the read that drains it"},
	{"WriteRead1500TCP", "Read1500TCP", "write(2) of 1,500 B to TCP, less the read that drains it"},
}

// KentryPkg is the package whose benchmarks a kentry bench.txt holds.
const KentryPkg = "github.com/twinloop/twinloop/scripts/kentry"

// IsKentry reports whether the bench.txt at path is a make kentry run's:
// Go benchmark results of KentryPkg.
func IsKentry(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte("\npkg: "+KentryPkg+"\n")) && !bytes.HasPrefix(b, []byte("pkg: "+KentryPkg+"\n")) {
		return fmt.Errorf("%s: not %s's benchmarks", path, KentryPkg)
	}
	ns, _, err := kentrySamples(b)
	if err == nil && len(ns) == 0 {
		err = fmt.Errorf("%s: no results", path)
	}
	return err
}

// WriteKentrySummary writes dir/summary.md from dir/bench.txt and
// dir/env.txt (kentry -dir, make study).
func WriteKentrySummary(dir string) error {
	bench, err := os.ReadFile(filepath.Join(dir, "bench.txt"))
	if err != nil {
		return err
	}
	env, err := os.ReadFile(filepath.Join(dir, "env.txt"))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var b bytes.Buffer
	if err := KentrySummary(&b, bench, env); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "summary.md"), b.Bytes(), 0o644)
}

// kentrySamples reads bench.txt's ns per call by benchmark, in file order, and
// the skipped benchmarks with their reasons.
func kentrySamples(bench []byte) (map[string][]float64, map[string]string, error) {
	ns := map[string][]float64{}
	r := benchfmt.NewReader(bytes.NewReader(bench), "bench.txt")
	for r.Scan() {
		switch rec := r.Result().(type) {
		case *benchfmt.SyntaxError:
			return nil, nil, rec
		case *benchfmt.Result:
			v, ok := rec.Value("sec/op")
			if !ok {
				continue
			}
			name := strings.TrimPrefix(rec.Name.String(), "Benchmark")
			if base, _, ok := strings.Cut(name, "-"); ok { // the GOMAXPROCS suffix
				name = base
			}
			ns[name] = append(ns[name], v*1e9)
		}
	}
	if err := r.Err(); err != nil {
		return nil, nil, err
	}
	skipped := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(bench))
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "--- SKIP: "):
			name = strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(line, "--- SKIP: ")), "Benchmark")
			skipped[name] = ""
		case name != "" && strings.HasPrefix(line, "    "):
			reason := strings.TrimSpace(line)
			if _, after, ok := strings.Cut(reason, ".go:"); ok { // file.go:NN: reason
				if _, r, ok := strings.Cut(after, ": "); ok {
					reason = r
				}
			}
			skipped[name] = strings.TrimSpace(skipped[name] + " " + reason)
		default:
			name = ""
		}
	}
	return ns, skipped, nil
}

// KentrySummary writes summary.md: each call's median ns with its 95%
// interval (benchmath's, as benchstat gives), the differences paired by
// round, and the machine with its mitigations from env.txt.
func KentrySummary(w io.Writer, bench, env []byte) error {
	ns, skipped, err := kentrySamples(bench)
	if err != nil {
		return err
	}
	envs := envLines(env)

	fmt.Fprintf(w, "# What one kernel entry costs (`make kentry`)\n\n")
	fmt.Fprintf(w, "Nanoseconds per call on one CPU, each call made as the backends make it "+
		"(raw unless the row says otherwise): the median over rounds with its 95%% interval "+
		"(golang.org/x/perf/benchmath, as benchstat). Each round ran every benchmark once, in its own process, in a shuffled order. "+
		"Regenerate with `go run ./scripts/kentry -dir <this folder>`; compare two runs with `benchstat a/bench.txt b/bench.txt`.\n\n")
	if v := envs["kentry"]; v != "" {
		fmt.Fprintf(w, "Run: %s.\n\n", v)
	}
	if v := envs["cpu"]; v != "" {
		fmt.Fprintf(w, "Machine: %s (family %s, model %s, stepping %s, microcode %s), %s; its mitigations are listed under the tables.\n\n",
			v, envs["cpu family"], envs["cpu model"], envs["cpu stepping"], envs["cpu microcode"], envs["kernel"])
	}
	if busy := busyWarning(envs); busy != "" {
		fmt.Fprintf(w, "**Not a quiet machine:** %s.\n\n", busy)
	}

	fmt.Fprintf(w, "| call | median ns | 95%% interval | rounds | what it times |\n|---|---:|---|---:|---|\n")
	known := map[string]bool{}
	for _, r := range kentryRows {
		known[r.name] = true
	}
	all := append([]kentryRow(nil), kentryRows...)
	var extra []string
	for name := range ns {
		if !known[name] {
			extra = append(extra, name)
		}
	}
	for name := range skipped {
		if !known[name] && ns[name] == nil {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		all = append(all, kentryRow{name: name})
	}
	for _, r := range all {
		xs := ns[r.name]
		switch {
		case len(xs) > 0:
			med, ci := medianCI(xs)
			fmt.Fprintf(w, "| %s | %s | %s | %d | %s |\n", r.name, med, ci, len(xs), r.what)
		case skipped[r.name] != "":
			fmt.Fprintf(w, "| %s | skipped | %s | 0 | %s |\n", r.name, skipped[r.name], r.what)
		case known[r.name]:
			fmt.Fprintf(w, "| %s | not run | | 0 | %s |\n", r.name, r.what)
		}
	}

	fmt.Fprintf(w, "\nDifferences, paired round by round (the k-th result of one row less the k-th of the other):\n\n")
	fmt.Fprintf(w, "| difference | median ns | 95%% interval | pairs | what it is |\n|---|---:|---|---:|---|\n")
	for _, d := range kentryDifferences {
		a, b := ns[d.a], ns[d.b]
		if len(a) == 0 || len(a) != len(b) {
			fmt.Fprintf(w, "| %s − %s | no pairs | | 0 | %s |\n", d.a, d.b, d.what)
			continue
		}
		diff := make([]float64, len(a))
		for i := range a {
			diff[i] = a[i] - b[i]
		}
		med, ci := medianCI(diff)
		fmt.Fprintf(w, "| %s − %s | %s | %s | %d | %s |\n", d.a, d.b, med, ci, len(diff), d.what)
	}

	fmt.Fprintf(w, "\n## The machine (env.txt)\n\n")
	if len(envs) == 0 {
		fmt.Fprintf(w, "No env.txt in this folder.\n")
		return nil
	}
	for _, k := range []string{"cpu", "cpu family", "cpu model", "cpu stepping", "cpu microcode", "kernel", "go", "commit",
		"load average at start (1, 5, 15 min)", "load average at end (1, 5, 15 min)", "steal at start (since boot)", "steal at end (since boot)"} {
		if v, ok := envs[k]; ok {
			fmt.Fprintf(w, "- %s: %s\n", k, v)
		}
	}
	fmt.Fprintf(w, "\nMitigations (/sys/devices/system/cpu/vulnerabilities, those not \"Not affected\"):\n\n")
	for _, m := range strings.Split(envs["mitigations"], " | ") {
		if m = strings.TrimSpace(m); m != "" {
			fmt.Fprintf(w, "- %s\n", m)
		}
	}
	return nil
}

// medianCI is xs's median and its 95% interval, formatted.
func medianCI(xs []float64) (median, interval string) {
	// NewSample sorts what it is given: a copy, so that xs keeps the
	// rounds' order for the differences.
	s := benchmath.AssumeNothing.Summary(benchmath.NewSample(slices.Clone(xs), &benchmath.DefaultThresholds), 0.95)
	median = fmt.Sprintf("%.1f", s.Center)
	if math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0) {
		var why []string
		for _, w := range s.Warnings {
			why = append(why, w.Error())
		}
		return median, "∞ (" + strings.Join(why, "; ") + ")"
	}
	return median, fmt.Sprintf("%.1f – %.1f", s.Lo, s.Hi)
}

// envLines is env.txt's "key: value" lines by key.
func envLines(env []byte) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(string(env), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// busyWarning says when the 1-minute load average at the start or the end
// of the run was above half the machine's cores: other work shared the
// CPU the benchmarks ran on, and its figures are that work's too.
func busyWarning(envs map[string]string) string {
	cores, err := strconv.Atoi(envs["cores"])
	if err != nil || cores == 0 {
		return ""
	}
	var busy []string
	for _, when := range []string{"start", "end"} {
		f := strings.Fields(envs["load average at "+when+" (1, 5, 15 min)"])
		if len(f) == 0 {
			continue
		}
		if la, err := strconv.ParseFloat(f[0], 64); err == nil && la > float64(cores)/2 {
			busy = append(busy, fmt.Sprintf("load average %s at the %s on %d cores", f[0], when, cores))
		}
	}
	return strings.Join(busy, ", ")
}
