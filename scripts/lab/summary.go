package lab

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchmath"
)

// Confidence is the level of every interval the lab states.
const Confidence = 0.95

// Run is what a labrun folder holds: rounds.csv's rows and env.txt, from
// which summary.md and bench.txt are written (and rewritten by
// make study) without anything else.
type Run struct {
	Name string     // the folder's name
	Rows [][]string // rounds.csv, schema Rounds
	Env  string     // env.txt
}

// ReadRun reads dir's rounds.csv and env.txt.
func ReadRun(dir string) (Run, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Run{}, err
	}
	f, err := os.Open(filepath.Join(dir, "rounds.csv"))
	if err != nil {
		return Run{}, err
	}
	defer f.Close()
	rows, err := ReadCSV(f, Rounds)
	if err != nil {
		return Run{}, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if len(rows) == 0 {
		return Run{}, fmt.Errorf("%s has no rows", f.Name())
	}
	env, err := os.ReadFile(filepath.Join(dir, "env.txt"))
	if err != nil {
		return Run{}, err
	}
	return Run{Name: filepath.Base(abs), Rows: rows, Env: string(env)}, nil
}

// Summarize rewrites dir's summary.md from its rounds.csv and env.txt.
func Summarize(dir string) error {
	r, err := ReadRun(dir)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "summary.md"), r.Summary(), 0o644)
}

// EnvValue is the value of env.txt's first "key: value" line, or "".
func EnvValue(env, key string) string {
	for _, l := range strings.Split(env, "\n") {
		if v, ok := strings.CutPrefix(l, key+": "); ok {
			return v
		}
	}
	return ""
}

// EnvValues is every value of env.txt's "key: value" lines.
func EnvValues(env, key string) []string {
	var out []string
	for _, l := range strings.Split(env, "\n") {
		if v, ok := strings.CutPrefix(l, key+": "); ok {
			out = append(out, v)
		}
	}
	return out
}

// col is the index of a Rounds column.
func col(name string) int {
	i := slices.Index(Rounds, name)
	if i < 0 {
		panic("no column " + name)
	}
	return i
}

// cell is one step's rows, in round order.
type cell struct {
	step, label string
	rows        [][]string
}

// cells groups the rows by step, each step's rows in round order, the
// steps in the order env.txt's "cells" line lists them (the steps
// file's), then any others in the order they first ran.
func (r Run) cells() []cell {
	var out []cell
	idx := map[string]int{}
	add := func(id, label string) int {
		i, ok := idx[id]
		if !ok {
			i = len(out)
			idx[id] = i
			out = append(out, cell{step: id, label: label})
		}
		return i
	}
	for _, id := range strings.Fields(EnvValue(r.Env, "cells")) {
		add(id, "")
	}
	for _, row := range r.Rows {
		i := add(row[col("step")], row[col("label")])
		out[i].label = row[col("label")]
		out[i].rows = append(out[i].rows, row)
	}
	out = slices.DeleteFunc(out, func(c cell) bool { return len(c.rows) == 0 })
	for _, c := range out {
		slices.SortStableFunc(c.rows, func(a, b []string) int { return atoi(a[col("round")]) - atoi(b[col("round")]) })
	}
	return out
}

func atoi(s string) int { v, _ := strconv.Atoi(s); return v }

// values is column name's numbers in rows, and the rounds they came
// from; empty fields are left out.
func values(rows [][]string, name string) (xs []float64, rounds []int) {
	for _, row := range rows {
		v, err := strconv.ParseFloat(row[col(name)], 64)
		if err != nil || math.IsNaN(v) {
			continue
		}
		xs = append(xs, v)
		rounds = append(rounds, atoi(row[col("round")]))
	}
	return xs, rounds
}

// summary is benchmath's median with its 95% interval (AssumeNothing,
// as benchstat's default: no distribution assumed).
func summary(xs []float64) benchmath.Summary {
	return benchmath.AssumeNothing.Summary(benchmath.NewSample(xs, &benchmath.DefaultThresholds), Confidence)
}

// Clusters splits a cell's values in two when they fall into two groups:
// sorted, the widest gap between neighbours, with at least two values
// and a fifth of them on each side, is more than twice the spread
// (max - min) of either side and more than 5% of the median of all.
// The example, io_uring at 63.7, 64.2, 86.8, 90.0 and 90.7
// µs/req, splits after 64.2 (gap 22.6 against spreads 0.5 and 3.9). It
// needs five values; ok is false when it finds no such gap.
func Clusters(xs []float64) (lo, hi []float64, ok bool) {
	n := len(xs)
	if n < 5 {
		return nil, nil, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	side := max(2, (n+4)/5)
	best, at := -1.0, 0
	for k := side; k <= n-side; k++ {
		if g := s[k] - s[k-1]; g > best {
			best, at = g, k
		}
	}
	if at == 0 {
		return nil, nil, false
	}
	lo, hi = s[:at], s[at:]
	spread := max(lo[len(lo)-1]-lo[0], hi[len(hi)-1]-hi[0])
	med := summary(s).Center
	if best > 2*spread && best > 0.05*math.Abs(med) {
		return lo, hi, true
	}
	return nil, nil, false
}

// Interval is one cell's median of a column with its 95% interval (Lo
// and Hi infinite when it has fewer than 6 rounds).
type Interval struct {
	Step  string
	Conns int
	benchmath.Summary
}

// Intervals is every cell's Interval of column name, in summary.md's
// order; cells without a value are left out.
func (r Run) Intervals(name string) []Interval {
	var out []Interval
	for _, c := range r.cells() {
		if xs, _ := values(c.rows, name); len(xs) > 0 {
			out = append(out, Interval{Step: c.step, Conns: atoi(c.rows[0][col("conns")]), Summary: summary(xs)})
		}
	}
	return out
}

// Ratio is a comparison A ÷ B of one column: the median of the per-round
// ratios with its interval, the p-value of benchmath's Mann-Whitney U
// test of A's values against B's (benchstat's), and the rounds paired.
type Ratio struct {
	Summary benchmath.Summary
	P       float64
	N       int
}

// Level is whether the interval includes 1.
func (r Ratio) Level() bool { return r.Summary.Lo <= 1 && 1 <= r.Summary.Hi }

// Finite is whether the interval has finite ends (enough rounds).
func (r Ratio) Finite() bool { return !math.IsInf(r.Summary.Lo, 0) && !math.IsInf(r.Summary.Hi, 0) }

// Compare is A ÷ B of column name, paired by round: only the rounds
// both ran count.
func Compare(a, b [][]string, name string) (Ratio, bool) {
	xa, ra := values(a, name)
	xb, rb := values(b, name)
	byRound := map[int]float64{}
	for i, r := range rb {
		byRound[r] = xb[i]
	}
	var ratios, pa, pb []float64
	for i, r := range ra {
		vb, ok := byRound[r]
		if !ok || vb == 0 {
			continue
		}
		ratios = append(ratios, xa[i]/vb)
		pa = append(pa, xa[i])
		pb = append(pb, vb)
	}
	if len(ratios) == 0 {
		return Ratio{}, false
	}
	th := benchmath.DefaultThresholds
	cmp := benchmath.AssumeNothing.Compare(benchmath.NewSample(pa, &th), benchmath.NewSample(pb, &th))
	return Ratio{Summary: summary(ratios), P: cmp.P, N: len(ratios)}, true
}

// metrics are the columns summary.md gives an interval for, with their
// headings and number formats.
var metrics = []struct{ col, head, format string }{
	{"machine_cpu_us_per_req", "machine CPU-µs/req", "%.2f"},
	{"cpu_us_per_req", "server CPU-µs/req", "%.2f"},
	{"rps", "req/s", "%.0f"},
	{"p99_us", "p99 µs", "%.0f"},
}

// Summary is summary.md.
func (r Run) Summary() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", r.Name)
	if EnvValue(r.Env, "quick") == "yes" {
		b.WriteString("**QUICK**: fewer and shorter rounds, to check the lab works; its intervals are wide or missing.\n\n")
	}
	if strings.HasPrefix(EnvValue(r.Env, "quiet gate"), "off") {
		b.WriteString("**Not a result**: the quiet gate was off (-quiet=false, for development): other processes' CPU is in these figures.\n\n")
	}
	if v := EnvValue(r.Env, "only"); v != "" {
		fmt.Fprintf(&b, "**Part of the steps file**: %s.\n\n", v)
	}
	if EnvValue(r.Env, "status") != "" {
		fmt.Fprintf(&b, "**%s**\n\n", EnvValue(r.Env, "status"))
	}
	fmt.Fprintf(&b, "Written by scripts/labrun from rounds.csv and env.txt (`go run ./scripts/labrun summarize DIR` rewrites it). "+
		"Steps file %s; %s rounds of %s per cell (some steps fewer: see n), seed %s (`-seed` reproduces the order); "+
		"placement: %s; commit %s.\n\n",
		orDash(EnvValue(r.Env, "steps")), orDash(EnvValue(r.Env, "rounds")), orDash(EnvValue(r.Env, "duration")),
		orDash(EnvValue(r.Env, "seed")), orDash(EnvValue(r.Env, "placement")), orDash(EnvValue(r.Env, "commit")))
	b.WriteString("Each figure is the median of the cell's rounds with its 95% interval (golang.org/x/perf/benchmath, " +
		"AssumeNothing: the order statistics around the median); fewer than 6 rounds give no interval (n < 6). " +
		"A cell whose rounds fall into two groups (sorted, a gap more than twice the spread of either side and 5% of the median) " +
		"is given as two behaviours, each side's median and rounds, instead of one median.\n\n")

	cells := r.cells()
	b.WriteString("## Cells\n\n| step | conns | n | errors |")
	for _, m := range metrics {
		fmt.Fprintf(&b, " %s |", m.head)
	}
	b.WriteString(" syscalls/req | peak RSS MB | quiet wait s | label |\n|---|---:|---:|---:|")
	for range metrics {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|---:|---|\n")
	var twos []string
	for _, c := range cells {
		errs := 0
		for _, row := range c.rows {
			errs += atoi(row[col("errors")]) + atoi(row[col("non2xx")])
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d |", c.step, c.rows[0][col("conns")], len(c.rows), errs)
		for _, m := range metrics {
			xs, _ := values(c.rows, m.col)
			if len(xs) == 0 {
				b.WriteString(" - |")
				continue
			}
			// p99 is a tail: its rounds split easily and say little
			// about the cell's behaviour; it keeps one median.
			if lo, hi, ok := Clusters(xs); ok && m.col != "p99_us" {
				fmt.Fprintf(&b, " two behaviours: "+m.format+" (%d) and "+m.format+" (%d) |",
					summary(lo).Center, len(lo), summary(hi).Center, len(hi))
				twos = append(twos, c.step+" "+m.head)
				continue
			}
			fmt.Fprintf(&b, " %s |", interval(summary(xs), m.format))
		}
		for _, name := range []string{"syscalls_per_req", "peak_rss_kb", "quiet_wait_s"} {
			xs, _ := values(c.rows, name)
			switch {
			case len(xs) == 0:
				b.WriteString(" - |")
			case name == "peak_rss_kb":
				fmt.Fprintf(&b, " %.1f |", summary(xs).Center/1024)
			case name == "quiet_wait_s":
				var sum float64
				for _, x := range xs {
					sum += x
				}
				fmt.Fprintf(&b, " %.1f |", sum)
			default:
				fmt.Fprintf(&b, " %.2f |", summary(xs).Center)
			}
		}
		fmt.Fprintf(&b, " %s |\n", c.label)
	}
	b.WriteString("\n![each cell's median and 95% interval](intervals.png)\n\nThe plot (intervals.png, drawn by `go run ./scripts/plot -labrun -dir DIR`, which make study runs) shows the same medians and intervals. " +
		"errors are wrk's socket errors and non-2xx responses, summed over the cell's rounds (a cell with any is suspect); " +
		"syscalls/req is twinloop's own count over the server's life (warm-up included), the median over rounds; " +
		"peak RSS the median VmHWM (nginx: master and worker together); quiet wait the seconds the quiet gate waited, summed over the cell's rounds.\n")
	if len(twos) > 0 {
		fmt.Fprintf(&b, "\n**Two behaviours** in %s: rounds.csv's round and slot columns say which rounds fell where.\n", strings.Join(twos, "; "))
	}

	b.Write(r.extras(cells))
	b.Write(r.fixedRate())

	compares := EnvValues(r.Env, "compare")
	if len(compares) > 0 {
		b.WriteString("\n## Comparisons\n\n" +
			"A ÷ B is the median of the per-round ratios (the two steps ran in the same block of each round) with its 95% interval; " +
			"p is benchmath's Mann-Whitney U test of A's rounds against B's (as benchstat). " +
			"**Level** means the interval includes 1.\n\n" +
			"| A ÷ B | rounds | machine CPU-µs/req | p | | server CPU-µs/req | p | | req/s | p | |\n" +
			"|---|---:|---:|---:|---|---:|---:|---|---:|---:|---|\n")
		byStep := map[string][][]string{}
		for _, c := range cells {
			byStep[c.step] = c.rows
		}
		for _, cmp := range compares {
			a, bID, _ := strings.Cut(cmp, " ")
			fmt.Fprintf(&b, "| %s ÷ %s |", a, bID)
			n := 0
			var cols []string
			for _, name := range []string{"machine_cpu_us_per_req", "cpu_us_per_req", "rps"} {
				rt, ok := Compare(byStep[a], byStep[bID], name)
				if !ok {
					cols = append(cols, " - | - | no paired rounds |")
					continue
				}
				n = rt.N
				cols = append(cols, fmt.Sprintf(" %s | %.3f | %s |", interval(rt.Summary, "%.3f"), rt.P, verdict(rt)))
			}
			fmt.Fprintf(&b, " %d |%s\n", n, strings.Join(cols, ""))
		}
	}
	b.WriteString("\n## Machine\n\n```\n")
	for _, k := range []string{"cpu", "cpu family", "cpu model", "cpu stepping", "cpu microcode", "kernel", "mitigations", "go",
		"steal over the run"} {
		if v := EnvValue(r.Env, k); v != "" {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteString("```\n")
	return b.Bytes()
}

// extraCols are the columns of the cells with a second load: cold
// cells (the set's files beside the cached page) and cgi-beside cells.
var extraCols = []struct {
	title, intro string
	cols, heads  []string
}{
	{"Cold sets", "The cold cells' own figures (the Cells table's req/s and p99 are the cached page's; CPU-µs/req both loads'): " +
		"the set's MB/s and files/s (exact, from scripts/cold.lua's done()) and the server's CPU seconds over the run.",
		[]string{"cold_MBps", "cold_files_per_s", "cpu_s"}, []string{"cold MB/s", "cold files/s", "server CPU s"}},
	{"CGI beside a static load", "The cgi-beside cells' later parts (the Cells table is the CGI script alone): " +
		"req/s of the static page and of the CGI script beside it, the script's p99, the /metrics GETs' p50, p99 and max, and SIGTERM to exit under load.",
		[]string{"mixed_static_rps", "mixed_cgi_rps", "mixed_cgi_p99_us", "scrape_p50_us", "scrape_p99_us", "scrape_max_us", "sigterm_ms"},
		[]string{"static req/s", "CGI req/s", "CGI p99 µs", "/metrics p50 µs", "/metrics p99 µs", "/metrics max µs", "SIGTERM→exit ms"}},
	{"Resident memory by mapping", "labrun -smaps: the server's resident memory halfway through the measured run, every connection open " +
		"(/proc/PID/smaps, nginx's master and worker together), in KiB: all, io_uring's rings and SQEs, the executable, anonymous memory, the rest.",
		[]string{"smaps_rss_kb", "smaps_uring_kb", "smaps_binary_kb", "smaps_anon_kb", "smaps_other_kb"},
		[]string{"RSS KiB", "io_uring KiB", "binary KiB", "anonymous KiB", "other KiB"}},
	{"Server connections behind HAProxy", "The proxy:OPTS cells' connections, per 1000 requests through HAProxy: " +
		"accepted by the twinloop instances (their exit counters, warm-up included), and HAProxy's server connections opened and reused (show stat, the measured run).",
		[]string{"server_accepts_per_kreq", "proxy_connects_per_kreq", "proxy_reuses_per_kreq"},
		[]string{"accepts/kreq", "HAProxy connects/kreq", "HAProxy reuses/kreq"}},
}

// extras is a section per kind of second load the run's cells had, each
// figure a median with its 95% interval; nothing for a run without.
func (r Run) extras(cells []cell) []byte {
	var b bytes.Buffer
	for _, e := range extraCols {
		var rows []cell
		for _, c := range cells {
			if xs, _ := values(c.rows, e.cols[0]); len(xs) > 0 {
				rows = append(rows, c)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n| step | n |", e.title, e.intro)
		for _, h := range e.heads {
			fmt.Fprintf(&b, " %s |", h)
		}
		b.WriteString("\n|---|---:|" + strings.Repeat("---:|", len(e.heads)) + "\n")
		for _, c := range rows {
			fmt.Fprintf(&b, "| %s | %d |", c.step, len(c.rows))
			for _, name := range e.cols {
				if xs, _ := values(c.rows, name); len(xs) > 0 {
					fmt.Fprintf(&b, " %s |", interval(summary(xs), "%.1f"))
				} else {
					b.WriteString(" - |")
				}
			}
			b.WriteString("\n")
		}
	}
	return b.Bytes()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// interval formats a median and its interval, or says why there is none.
func interval(s benchmath.Summary, format string) string {
	if math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0) {
		return fmt.Sprintf(format+" (n < 6)", s.Center)
	}
	return fmt.Sprintf(format+" ["+format+", "+format+"]", s.Center, s.Lo, s.Hi)
}

func verdict(r Ratio) string {
	switch {
	case !r.Finite():
		return "no interval"
	case r.Level():
		return "**level**"
	case r.Summary.Hi < 1:
		return fmt.Sprintf("A lower by %.1f%%", 100*(1-r.Summary.Center))
	default:
		return fmt.Sprintf("A higher by %.1f%%", 100*(r.Summary.Center-1))
	}
}

// WriteBench writes the rows in Go's benchmark format, one line per
// cell and round, so that benchstat compares two runs:
//
//	benchstat old/bench.txt new/bench.txt
//
// The iteration count is the requests wrk made; every figure is a unit
// of its own (machine-us/req, server-us/req, req/s, p99-us, ...).
func (r Run) WriteBench(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("goos: linux\n")
	if v := EnvValue(r.Env, "cpu"); v != "" {
		fmt.Fprintf(&b, "cpu: %s\n", v)
	}
	if v := EnvValue(r.Env, "commit"); v != "" {
		fmt.Fprintf(&b, "commit: %s\n", strings.Fields(v)[0])
	}
	// Named after the steps file, so that a QUICK run and a full one
	// of it compare.
	name := "Lab"
	if n := strings.TrimSuffix(filepath.Base(EnvValue(r.Env, "steps")), ".steps"); n != "" && n != "." {
		name = strings.ToUpper(n[:1]) + strings.ReplaceAll(n[1:], "-", "")
	}
	units := []struct{ col, unit string }{
		{"machine_cpu_us_per_req", "machine-us/req"}, {"cpu_us_per_req", "server-us/req"},
		{"softirq_us_per_req", "softirq-us/req"}, {"client_cpu_us_per_req", "wrk-us/req"},
		{"rps", "req/s"}, {"p50_us", "p50-us"}, {"p99_us", "p99-us"}, {"cs_per_req", "cs/req"},
		{"syscalls_per_req", "syscalls/req"}, {"peak_rss_kb", "peak-rss-kB"}, {"p999_us", "p999-us"},
	}
	for _, row := range r.Rows {
		n, err := strconv.ParseInt(row[col("requests")], 10, 64)
		if err != nil || n <= 0 {
			continue // wrk did not finish: no figures
		}
		fmt.Fprintf(&b, "Benchmark%s/step=%s/conns=%s %d", name, row[col("step")], row[col("conns")], n)
		for _, u := range units {
			if v := row[col(u.col)]; v != "" {
				fmt.Fprintf(&b, " %s %s", v, u.unit)
			}
		}
		b.WriteString("\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// RateCell is a rate:N cell (scripts/loadgen, open loop) over its rounds:
// the medians with their 95% intervals of the rate it achieved, its
// latencies from the intended send time, and its CPU per request; the
// requests left unsent summed; and how many rounds were saturated (under
// 95% of the offered rate achieved, or over 1% of it left unsent).
type RateCell struct {
	Step, Kind, Label string
	Rate, N           int
	Achieved          benchmath.Summary // req/s
	P50, P99, P999    benchmath.Summary // µs
	Machine, CPU      benchmath.Summary // CPU-µs per request
	Unsent            int64
	Saturated         int
}

// RateCells are the run's rate:N cells, in summary.md's order.
func (r Run) RateCells() []RateCell {
	var out []RateCell
	for _, c := range r.cells() {
		rate := atoi(c.rows[0][col("rate_offered")])
		if rate == 0 {
			continue
		}
		rc := RateCell{Step: c.step, Kind: c.rows[0][col("kind")], Label: c.label, Rate: rate, N: len(c.rows)}
		for _, f := range []struct {
			name string
			to   *benchmath.Summary
		}{{"rps", &rc.Achieved}, {"p50_us", &rc.P50}, {"p99_us", &rc.P99}, {"p999_us", &rc.P999},
			{"machine_cpu_us_per_req", &rc.Machine}, {"cpu_us_per_req", &rc.CPU}} {
			*f.to = benchmath.Summary{Center: math.NaN(), Lo: math.Inf(-1), Hi: math.Inf(1)}
			if xs, _ := values(c.rows, f.name); len(xs) > 0 {
				*f.to = summary(xs)
			}
		}
		for _, row := range c.rows {
			unsent, _ := strconv.ParseInt(row[col("unsent")], 10, 64)
			rc.Unsent += unsent
			rps, _ := strconv.ParseFloat(row[col("rps")], 64)
			d, _ := strconv.ParseFloat(row[col("duration_s")], 64)
			if rps < 0.95*float64(rate) || float64(unsent) > 0.01*float64(rate)*d {
				rc.Saturated++
			}
		}
		out = append(out, rc)
	}
	return out
}

// fixedRate is summary.md's section on the rate:N cells, or nothing.
func (r Run) fixedRate() []byte {
	cells := r.RateCells()
	if len(cells) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n## Fixed rate\n\nThe rate:N cells (scripts/loadgen, open loop: request i is due at start + i/N, its latency counted from then, " +
		"so a server that falls behind is charged for the wait): the rate achieved, the latency percentiles from the intended send time " +
		"and the whole machine's CPU per request, each the median of the cell's rounds with its 95% interval (benchmath, as above); " +
		"unsent is the requests never sent, summed over the rounds; a round is saturated when it achieved under 95% of the offered rate " +
		"or left over 1% of it unsent (its latency is then the queue the run built, and grows with the run's length). " +
		"latency.csv has every measured run's whole histogram.\n\n" +
		"| step | offered req/s | n | achieved req/s | p50 µs | p99 µs | p99.9 µs | machine CPU-µs/req | unsent | saturated rounds |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cells {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %s | %d | %d |\n", c.Step, c.Rate, c.N,
			interval(c.Achieved, "%.0f"), interval(c.P50, "%.0f"), interval(c.P99, "%.0f"), interval(c.P999, "%.0f"),
			interval(c.Machine, "%.2f"), c.Unsent, c.Saturated)
	}
	var pairs [][2]string
	for _, cmp := range EnvValues(r.Env, "compare") {
		a, bID, _ := strings.Cut(cmp, " ")
		if slices.ContainsFunc(cells, func(c RateCell) bool { return c.Step == a }) &&
			slices.ContainsFunc(cells, func(c RateCell) bool { return c.Step == bID }) {
			pairs = append(pairs, [2]string{a, bID})
		}
	}
	if len(pairs) > 0 {
		byStep := map[string][][]string{}
		for _, c := range r.cells() {
			byStep[c.step] = c.rows
		}
		b.WriteString("\nThe compare lines' latencies: A ÷ B of each percentile, the median of the per-round ratios with its 95% interval " +
			"(as the Comparisons below, which give the CPU and req/s).\n\n" +
			"| A ÷ B | rounds | p50 | p99 | p99.9 |\n|---|---:|---:|---:|---:|\n")
		for _, pr := range pairs {
			fmt.Fprintf(&b, "| %s ÷ %s |", pr[0], pr[1])
			n := 0
			var cols []string
			for _, name := range []string{"p50_us", "p99_us", "p999_us"} {
				rt, ok := Compare(byStep[pr[0]], byStep[pr[1]], name)
				if !ok {
					cols = append(cols, " - |")
					continue
				}
				n = rt.N
				cols = append(cols, fmt.Sprintf(" %s |", interval(rt.Summary, "%.3f")))
			}
			fmt.Fprintf(&b, " %d |%s\n", n, strings.Join(cols, ""))
		}
	}
	b.WriteString("\n![latency percentiles against the offered rate](fixed-rate.png)\n\n" +
		"fixed-rate.png (`go run ./scripts/plot -labrun -dir DIR`) draws p50, p99 and p99.9 and the CPU per request against the offered rate, " +
		"a line per server through the rates it kept up with, each point the median with its 95% interval; a saturated cell is a ringed point off the line.\n")
	return b.Bytes()
}
