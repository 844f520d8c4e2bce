package main

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twinloop/twinloop/scripts/lab"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// bodyCell is one (size, backend, body path) of a body-size run, reduced
// over its rounds: medians, and the whole machine's min-max.
type bodyCell struct {
	KiB     float64 // the body's size
	Backend string  // epoll, uring
	File    bool    // the body sent from the file (ab-c50.sh's new), not from memory (old)
	Rounds  int
	// Server and Machine are CPU-µs per request, of the server process
	// and of every CPU; Softirq and Client likewise.
	RPS, Server, Machine, Softirq, Client, Syscalls float64
	MachineLo, MachineHi                            float64
}

// GiB is how many GiB one response's body is.
func (c bodyCell) GiB() float64 { return c.KiB / (1 << 20) }

// perGiB is whole-machine CPU-µs per request as CPU seconds per GiB of
// body sent.
func (c bodyCell) perGiB(us float64) float64 { return us * 1e-6 / c.GiB() }

func (c bodyCell) label() string {
	path := "memory"
	if c.File {
		path = "file"
	}
	return labelOr(bodyBackendLabels, c.Backend) + ", " + path
}

var bodyBackendLabels = map[string]string{"epoll": "epoll", "uring": "io_uring"}

// parseKiB reads a section's size: "4k" (KiB) or "1m" (MiB).
func parseKiB(s string) (float64, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		s = strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		s, mult = strings.TrimSuffix(s, "m"), 1024
	default:
		return 0, fmt.Errorf("size %q: want <n>k or <n>m", s)
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want <n>k or <n>m", s)
	}
	return n * mult, nil
}

// readBodySizes parses a body-size run's sizes.txt: for each size a line
// "== <size>" and then one scripts/ab-c50.sh table (lab.AB), in which old
// is the body from memory and new the body from the file. Cells come
// sorted by size, backend, then memory before file.
func readBodySizes(r io.Reader) ([]bodyCell, error) {
	var out []bodyCell
	var kib float64
	var table bytes.Buffer
	flush := func() error {
		if table.Len() == 0 {
			return nil
		}
		recs, err := lab.ReadTSV(&table, lab.AB)
		table.Reset()
		if err != nil {
			return fmt.Errorf("section %g KiB: %w", kib, err)
		}
		type key struct {
			backend string
			file    bool
		}
		f := rounds{schema: lab.AB}.field
		keys, groups := groupRounds(lab.AB, recs, func(rec []string) key {
			return key{f(rec, "backend"), f(rec, "binary") == "new"}
		})
		for _, k := range keys {
			rs := groups[k]
			c := bodyCell{KiB: kib, Backend: k.backend, File: k.file, Rounds: len(rs.recs),
				RPS: rs.median("req_s"), Server: rs.median("cpu_us_per_req"), Machine: rs.median("machine_cpu_us_per_req"),
				Softirq: rs.median("softirq_us_per_req"), Client: rs.median("client_cpu_us_per_req"),
				Syscalls: rs.median("syscalls_per_req")}
			c.MachineLo, c.MachineHi = rs.spread("machine_cpu_us_per_req")
			out = append(out, c)
		}
		return nil
	}
	sc := bufio.NewScanner(r)
	seen := false
	for sc.Scan() {
		line := sc.Text()
		if size, ok := strings.CutPrefix(line, "== "); ok {
			if err := flush(); err != nil {
				return nil, err
			}
			var err error
			if kib, err = parseKiB(strings.TrimSpace(size)); err != nil {
				return nil, err
			}
			seen = true
			continue
		}
		if !seen {
			if strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("%q before the first \"== <size>\" line", line)
			}
			continue
		}
		table.WriteString(line + "\n")
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b bodyCell) int {
		return cmp.Or(cmp.Compare(a.KiB, b.KiB), cmpIn(backendOrder, a.Backend, b.Backend), compareBool(a.File, b.File))
	})
	return out, nil
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// runBodySizes writes dir's summary.md and body-sizes.png from sizes.txt.
func runBodySizes(dir string) error {
	return runMode(dir, "sizes.txt", "body-sizes.png", readBodySizes, bodySizePanels, bodySizesMD)
}

// thousands formats v rounded to an integer, with thousands separated by
// commas, as the hand-written tables in results/ do.
func thousands(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// sizeKiB is a size in KiB for people: "4 KiB", "1 MiB".
func sizeKiB(kib float64) string {
	if kib >= 1024 && math.Mod(kib, 1024) == 0 {
		return fmt.Sprintf("%g MiB", kib/1024)
	}
	return fmt.Sprintf("%g KiB", kib)
}

func withRange(v, lo, hi float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmtNum(v, "%.2f") + " (" + fmtRange(lo, hi) + ")"
}

func bodySizesMD(cells []bodyCell, run, env string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The body path by size: %s\n\n", run)
	b.WriteString("Written by `scripts/plot -bodysizes` from `sizes.txt`: for each body size a line `== <size>`,\n")
	b.WriteString("then one `scripts/ab-c50.sh` table in which `old` is the body sent from memory and `new`\n")
	b.WriteString("the body sent from the file (README.md says how the run was made). Medians over the\n")
	b.WriteString("rounds, the whole machine's min-max in brackets. CPU columns are µs per request, of the\n")
	b.WriteString("whole machine (every CPU, softirq included) and of the server process. The last column is\n")
	b.WriteString("file ÷ memory, whole machine.\n\n")
	if env != "" {
		b.WriteString("```\n" + strings.TrimSpace(env) + "\n```\n\n")
	}
	b.WriteString("| size | backend | memory: req/s | memory: machine | memory: server | file: req/s | file: machine | file: server | file ÷ memory |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, mem := range cells {
		if mem.File {
			continue
		}
		i := slices.IndexFunc(cells, func(c bodyCell) bool { return c.File && c.KiB == mem.KiB && c.Backend == mem.Backend })
		file := bodyCell{RPS: math.NaN(), Server: math.NaN(), Machine: math.NaN()}
		if i >= 0 {
			file = cells[i]
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			sizeKiB(mem.KiB), labelOr(bodyBackendLabels, mem.Backend),
			thousands(mem.RPS), withRange(mem.Machine, mem.MachineLo, mem.MachineHi), fmtNum(mem.Server, "%.2f"),
			thousands(file.RPS), withRange(file.Machine, file.MachineLo, file.MachineHi), fmtNum(file.Server, "%.2f"),
			fmtNum(file.Machine/mem.Machine, "%.2f"))
	}
	b.WriteString("\n## Per GiB sent, and each cell's other columns\n\n")
	b.WriteString("CPU seconds per GiB of body sent: whole-machine CPU-µs per request ÷ the body's size (the\n")
	b.WriteString("header left out), median and min-max. Syscalls per request from the server's own\n")
	b.WriteString("counters; softirq and wrk in CPU-µs per request.\n\n")
	b.WriteString("| size | backend, body | rounds | machine CPU s/GiB | syscalls/req | softirq CPU-µs/req | wrk CPU-µs/req |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
	for _, c := range cells {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s |\n", sizeKiB(c.KiB), c.label(), c.Rounds,
			withRange(c.perGiB(c.Machine), c.perGiB(c.MachineLo), c.perGiB(c.MachineHi)),
			fmtNum(c.Syscalls, "%.2f"), fmtNum(c.Softirq, "%.2f"), fmtNum(c.Client, "%.2f"))
	}
	b.WriteString("\n![body-sizes](body-sizes.png)\n\n")
	b.WriteString("Against the body's size (log scale), a line per backend and body path, memory solid and\n")
	b.WriteString("file dashed: whole-machine CPU seconds per GiB sent, and whole-machine CPU-µs per\n")
	b.WriteString("request (both log scales), the median with the rounds' min-max as error bars. The file's\n")
	b.WriteString("points are drawn 4% to the right of their size, so that the bars do not overlap.\n")
	return b.Bytes()
}

// bodySizePanels: whole-machine CPU per GiB sent and per request against
// the body's size, a line per backend and body path, with min-max bars.
func bodySizePanels(cells []bodyCell) [][]*plot.Plot {
	type line struct {
		backend string
		file    bool
	}
	lines := firstSeen(cells, func(c bodyCell) line { return line{c.Backend, c.File} })
	backends := firstSeen(cells, func(c bodyCell) string { return c.Backend })
	panel := func(title, y string, f func(c bodyCell, us float64) float64) *plot.Plot {
		p := newPlot(title, "body size, KiB (log)", y)
		for _, l := range lines {
			var xys plotter.XYs
			var errs plotter.YErrors
			var label string
			for _, c := range cells {
				v := f(c, c.Machine)
				if c.Backend != l.backend || c.File != l.file || !(v > 0) {
					continue
				}
				x := c.KiB
				if c.File {
					x *= 1.04 // beside memory's bars, not on them
				}
				xys = append(xys, plotter.XY{X: x, Y: v})
				errs = append(errs, struct{ Low, High float64 }{v - f(c, c.MachineLo), f(c, c.MachineHi) - v})
				label = c.label()
			}
			if len(xys) == 0 {
				continue
			}
			i := slices.Index(backends, l.backend)
			ln, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				continue
			}
			ln.Color, pts.Color, pts.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
			if l.file {
				ln.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
				pts.Shape = plotutil.Shape(i + len(backends))
			}
			p.Add(ln, pts)
			addYErrors(p, i, xys, errs)
			p.Legend.Add(label, ln, pts)
		}
		logY(p)
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = kibTicks(cells)
		p.X.Min, p.X.Max = p.X.Min/1.3, p.X.Max*1.3
		return p
	}
	return [][]*plot.Plot{{
		panel("whole-machine CPU per GiB sent", "CPU s per GiB (log)", func(c bodyCell, us float64) float64 { return c.perGiB(us) }),
		panel("whole-machine CPU per request", "CPU-µs per request (log)", func(_ bodyCell, us float64) float64 { return us }),
	}}
}

// kibTicks marks the measured sizes.
func kibTicks(cells []bodyCell) plot.ConstantTicks {
	var ts plot.ConstantTicks
	for _, k := range firstSeen(cells, func(c bodyCell) float64 { return c.KiB }) {
		ts = append(ts, plot.Tick{Value: k, Label: strconv.FormatFloat(k, 'f', -1, 64)})
	}
	return ts
}
