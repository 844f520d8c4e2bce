package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/twinloop/twinloop/scripts/lab"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// step is one row of the ladder, reduced over its rounds: medians of the
// per-run columns; the syscall columns come from one perf run per step.
type step struct {
	ID, Label                   string
	Runs                        int
	RPS, P99, CPU, CS           float64
	Errors, Non2xx              int64
	Own, Proc                   float64
	Futex, Sleep, Signal, Netpl float64
	// The whole machine's, softirq's and wrk's CPU-µs per request
	// (lab.Machine); NaN in a run from before issue 27.
	Machine, Softirq, Client float64
	// MachineLo and MachineHi are the lowest and highest whole-machine
	// CPU-µs per request over the rounds: the spread the median hides.
	MachineLo, MachineHi float64
	// Conns is the step's connections; RSS the median peak RSS in KiB;
	// CQEs io_uring's completions per request (perf run). NaN in a run
	// from before the columns.
	Conns, RSS, CQEs float64
}

// Runtime is the process-wide syscalls the loop's own counters do not
// see: the Go runtime's (or, for a non-Go server, nothing: NaN).
func (s step) Runtime() float64 { return s.Proc - s.Own }

// readLadder parses the ladder's summary.csv, keeping the steps' order.
func readLadder(r io.Reader) ([]step, error) {
	// The schema scripts/wrkparse writes for scripts/ladder.sh.
	recs, err := lab.ReadCSV(r, lab.Ladder)
	if err != nil {
		return nil, err
	}
	var order []string
	rows := map[string][][]string{}
	for _, rec := range recs {
		if _, ok := rows[rec[0]]; !ok {
			order = append(order, rec[0])
		}
		rows[rec[0]] = append(rows[rec[0]], rec)
	}
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return math.NaN()
		}
		return v
	}
	col := func(recs [][]string, i int) float64 {
		var vs []float64
		for _, r := range recs {
			if i >= len(r) {
				return math.NaN() // a summary.csv from before the column
			}
			vs = append(vs, num(r[i]))
		}
		return median(vs)
	}
	spread := func(recs [][]string, i int) (lo, hi float64) {
		lo, hi = math.NaN(), math.NaN()
		for _, r := range recs {
			if i >= len(r) {
				return math.NaN(), math.NaN()
			}
			v := num(r[i])
			if !(v >= lo) { // NaN-safe: the first value, or a lower one
				lo = v
			}
			if !(v <= hi) {
				hi = v
			}
		}
		return lo, hi
	}
	var out []step
	for _, id := range order {
		rs := rows[id]
		s := step{ID: id, Label: rs[0][1], Runs: len(rs),
			RPS: col(rs, 3), P99: col(rs, 4), CPU: col(rs, 7), CS: col(rs, 8),
			Own: num(rs[0][9]), Proc: num(rs[0][10]), Futex: num(rs[0][11]), Sleep: num(rs[0][12]),
			Signal: num(rs[0][13]), Netpl: num(rs[0][14]),
			Machine: col(rs, 15), Softirq: col(rs, 16), Client: col(rs, 17)}
		s.MachineLo, s.MachineHi = spread(rs, 15)
		s.Conns, s.RSS = col(rs, 18), col(rs, 19)
		if len(rs[0]) > 20 {
			s.CQEs = num(rs[0][20])
		} else {
			s.CQEs = math.NaN()
		}
		for _, r := range rs {
			e, _ := strconv.ParseInt(r[5], 10, 64)
			n, _ := strconv.ParseInt(r[6], 10, 64)
			s.Errors += e
			s.Non2xx += n
		}
		out = append(out, s)
	}
	return out, nil
}

// share is one category's part of a step's CPU (attribution.csv).
type share struct {
	Step, Category string
	Samples        int
	Share          float64
}

func readAttribution(r io.Reader) ([]share, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || !slices.Equal(recs[0], []string{"step", "category", "samples", "share"}) {
		return nil, fmt.Errorf("attribution.csv: first line must be step,category,samples,share")
	}
	var out []share
	for _, rec := range recs[1:] {
		n, err1 := strconv.Atoi(rec[2])
		f, err2 := strconv.ParseFloat(rec[3], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("attribution.csv: bad row %v", rec)
		}
		out = append(out, share{rec[0], rec[1], n, f})
	}
	return out, nil
}

// attribCategories are attribution.csv's categories with their labels.
var attribCategories = []struct{ id, label string }{
	{"tcpip", "kernel TCP/IP + loopback"},
	{"syscall", "syscall entry/exit, epoll, io_uring"},
	{"kernel", "other kernel (scheduler, futex, faults, IRQ)"},
	{"runtime", "Go runtime"},
	{"server", "server's own code"},
	{"libs", "libc, vDSO"},
}

// runLadder writes dir's ladder summary.md and plots.
func runLadder(dir string) error {
	steps, err := readRowsFile(filepath.Join(dir, "summary.csv"), readLadder)
	if err != nil {
		return err
	}
	var att []share
	if af, err := os.Open(filepath.Join(dir, "attribution.csv")); err == nil {
		att, err = readAttribution(af)
		af.Close()
		if err != nil {
			return err
		}
	}
	plots := []string{"ladder.png"}
	if err := savePNG(filepath.Join(dir, "ladder.png"), ladderPanels(steps)); err != nil {
		return err
	}
	if len(att) > 0 {
		if err := savePNG(filepath.Join(dir, "attribution.png"), [][]*plot.Plot{{attributionPlot(steps, att)}}); err != nil {
			return err
		}
		plots = append(plots, "attribution.png")
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env.txt"))
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "summary.md"), ladderMD(steps, att, filepath.Base(abs), string(env), plots), 0o644)
}

func byID(steps []step, id string) (step, bool) {
	i := slices.IndexFunc(steps, func(s step) bool { return s.ID == id })
	if i < 0 {
		return step{}, false
	}
	return steps[i], true
}

func ladderMD(steps []step, att []share, run, env string, plots []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Syscall ladder %s\n\n", run)
	b.WriteString("Written by `scripts/plot -ladder` from `summary.csv` (one row per step and round) and\n")
	b.WriteString("`attribution.csv`; made by `make ladder` (`scripts/ladder.sh`, which says how each column\n")
	b.WriteString("is measured). Medians over the rounds; syscall columns from one perf run per step.\n\n")
	b.WriteString("```\n" + strings.TrimSpace(env) + "\n```\n\n")
	b.WriteString("| step | what | req/s | p99 µs | CPU-µs/req | ctx sw/req | syscalls/req, own counters | syscalls/req, whole process (perf) | not counted by the loop (Go runtime) | futex | nanosleep | tgkill, rt_sigreturn, getpid | epoll_pwait (Go netpoller) | errors | non-2xx | machine CPU-µs/req | machine, min-max | softirq CPU-µs/req | wrk CPU-µs/req |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range steps {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d | %s | %s | %s | %s |\n", s.ID, s.Label,
			fmtNum(s.RPS, "%.0f"), fmtNum(s.P99, "%.0f"), fmtNum(s.CPU, "%.2f"), fmtNum(s.CS, "%.3f"),
			fmtNum(s.Own, "%.3f"), fmtNum(s.Proc, "%.3f"), fmtNum(s.Runtime(), "%.3f"),
			fmtNum(s.Futex, "%.3f"), fmtNum(s.Sleep, "%.3f"), fmtNum(s.Signal, "%.3f"), fmtNum(s.Netpl, "%.3f"),
			s.Errors, s.Non2xx, fmtNum(s.Machine, "%.2f"), fmtRange(s.MachineLo, s.MachineHi),
			fmtNum(s.Softirq, "%.2f"), fmtNum(s.Client, "%.2f"))
	}
	b.Write(pairsMD(steps))
	b.Write(memoryMD(steps))
	if g, ok := byID(steps, "gnet"); ok {
		b.WriteString("\n## Against gnet (same run, interleaved)\n\n")
		b.WriteString("| step | req/s ÷ gnet's | CPU-µs/req ÷ gnet's |\n|---|---:|---:|\n")
		for _, s := range steps {
			if s.ID == "gnet" || !strings.Contains("et uring uring-block uring-rawsubmit uring-spin uring-rawwait uring-batchwait nginx fasthttp", s.ID) {
				continue
			}
			fmt.Fprintf(&b, "| %s | %.2f | %.2f |\n", s.ID, s.RPS/g.RPS, s.CPU/g.CPU)
		}
	}
	if len(att) > 0 {
		b.WriteString("\n## Where each µs goes\n\n")
		b.WriteString("`perf record -e cpu-clock -g` under the same load; each sample attributed by `scripts/attrib`\n")
		b.WriteString("(its doc comment has the rules); µs per request = the step's median CPU-µs/req × the share.\n")
		b.WriteString("`raw/<step>-attrib-top.txt` lists the most sampled functions.\n\n")
		b.WriteString("| step | CPU-µs/req |")
		for _, c := range attribCategories {
			b.WriteString(" " + c.label + " |")
		}
		b.WriteString("\n|---|---:|" + strings.Repeat("---:|", len(attribCategories)) + "\n")
		for _, id := range attribSteps(att) {
			s, _ := byID(steps, id)
			fmt.Fprintf(&b, "| %s | %s |", id, fmtNum(s.CPU, "%.2f"))
			for _, c := range attribCategories {
				sh := shareOf(att, id, c.id)
				fmt.Fprintf(&b, " %s (%.0f%%) |", fmtNum(sh*s.CPU, "%.2f"), 100*sh)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\n")
	for _, p := range plots {
		fmt.Fprintf(&b, "![%s](%s)\n\n", strings.TrimSuffix(p, ".png"), p)
	}
	return b.Bytes()
}

func attribSteps(att []share) []string {
	var ids []string
	for _, a := range att {
		if !slices.Contains(ids, a.Step) {
			ids = append(ids, a.Step)
		}
	}
	return ids
}

func shareOf(att []share, stepID, cat string) float64 {
	for _, a := range att {
		if a.Step == stepID && a.Category == cat {
			return a.Share
		}
	}
	return 0
}

// ladderPanels: req/s, CPU-µs/req and process-wide syscalls/req, a
// horizontal bar per step, the first step on top.
func ladderPanels(steps []step) [][]*plot.Plot {
	labels := make([]string, len(steps))
	for i, s := range steps {
		labels[i] = s.ID
	}
	bars := func(title string, f func(step) float64) *plot.Plot {
		p := newPlot(title, "", "")
		vs := make([]float64, len(steps))
		for i, s := range steps {
			vs[i] = f(s)
		}
		hbars(p, labels, vs, 0.35*vg.Centimeter)
		p.X.Min = 0
		return p
	}
	row := []*plot.Plot{
		bars("req/s", func(s step) float64 { return s.RPS }),
		bars("server CPU-µs per request", func(s step) float64 { return s.CPU }),
	}
	if slices.ContainsFunc(steps, func(s step) bool { return !math.IsNaN(s.Machine) }) {
		row = append(row, bars("whole-machine CPU-µs per request", func(s step) float64 { return s.Machine }))
	}
	row = append(row, bars("syscalls per request, whole process", func(s step) float64 { return s.Proc }))
	return [][]*plot.Plot{row}
}

// attributionPlot: CPU-µs per request of each sampled step, stacked by
// category.
func attributionPlot(steps []step, att []share) *plot.Plot {
	ids := attribSteps(att)
	p := newPlot("where each CPU-µs per request goes", "CPU-µs per request", "")
	var prev *plotter.BarChart
	for ci, c := range attribCategories {
		vs := make(plotter.Values, len(ids))
		for i, id := range ids {
			s, _ := byID(steps, id)
			cpu := s.CPU
			if math.IsNaN(cpu) {
				cpu = 0
			}
			vs[i] = cpu * shareOf(att, id, c.id)
		}
		bc, err := plotter.NewBarChart(vs, 0.8*vg.Centimeter)
		if err != nil {
			continue
		}
		bc.Horizontal = true
		bc.Color = plotutil.Color(ci)
		bc.LineStyle.Width = 0
		if prev != nil {
			bc.StackOn(prev)
		}
		prev = bc
		p.Add(bc)
		p.Legend.Add(c.label, bc)
	}
	p.NominalY(ids...)
	p.X.Min = 0
	p.X.Max *= 2.3 // room for the legend on the right
	return p
}

func fmtRange(lo, hi float64) string {
	if math.IsNaN(lo) {
		return "–"
	}
	return fmt.Sprintf("%.2f-%.2f", lo, hi)
}

// pairsMD is the A/A pairs in whole-machine CPU per request (a step X-aa
// is the same server as X, measured in another slot of each round), and
// io_uring against epoll (uring ÷ et) when the run has both. A ratio
// whose distance from 1 is inside the largest A/A distance is "level":
// the slots alone move a figure that far.
func pairsMD(steps []step) []byte {
	var b bytes.Buffer
	b.WriteString("\n## The A/A pairs (whole-machine CPU-µs per request)\n\n")
	b.WriteString("| pair | CPU-µs/req | ratio |\n|---|---|---:|\n")
	noise, pairs := 0.0, 0
	for _, aa := range steps {
		a, ok := byID(steps, strings.TrimSuffix(aa.ID, "-aa"))
		if !strings.HasSuffix(aa.ID, "-aa") || !ok || math.IsNaN(a.Machine) {
			continue
		}
		r := aa.Machine / a.Machine
		noise, pairs = max(noise, math.Abs(r-1)), pairs+1
		fmt.Fprintf(&b, "| A/A: %s in a second slot ÷ %s | %.2f ÷ %.2f | %.2f |\n", aa.ID, a.ID, aa.Machine, a.Machine, r)
	}
	et, okE := byID(steps, "et")
	ur, okU := byID(steps, "uring")
	if !okE || !okU || math.IsNaN(et.Machine) {
		if pairs == 0 {
			return nil
		}
		return b.Bytes()
	}
	r := ur.Machine / et.Machine
	verdict := "no A/A pair in this run"
	switch {
	case noise > 0 && math.Abs(r-1) <= noise:
		verdict = fmt.Sprintf("level: inside the A/A spread of ±%.0f%%", 100*noise)
	case noise > 0:
		verdict = fmt.Sprintf("outside the A/A spread of ±%.0f%%", 100*noise)
	}
	fmt.Fprintf(&b, "| io_uring ÷ epoll | %.2f ÷ %.2f | %.2f (%s) |\n", ur.Machine, et.Machine, r, verdict)
	return b.Bytes()
}

// memoryMD is each step's connections, peak RSS and io_uring completions
// per request, for a run that recorded them.
func memoryMD(steps []step) []byte {
	if !slices.ContainsFunc(steps, func(s step) bool { return !math.IsNaN(s.RSS) }) {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n## Connections, memory and completions\n\n")
	b.WriteString("| step | connections | peak RSS KiB | CQEs/req (io_uring) |\n|---|---:|---:|---:|\n")
	for _, s := range steps {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", s.ID, fmtNum(s.Conns, "%.0f"), fmtNum(s.RSS, "%.0f"), fmtNum(s.CQEs, "%.3f"))
	}
	return b.Bytes()
}
