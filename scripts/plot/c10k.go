package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/twinloop/twinloop/scripts/lab"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// c10kCell is one (mode, server, backend) of scripts/c10k-mem.sh, reduced
// over its runs: medians, errors summed.
type c10kCell struct {
	Mode            string // keepalive, close
	Server, Backend string // old, new or nginx; epoll, uring or nginx
	Runs            int
	RPS             float64
	// CPU-µs per request: the server process, every CPU, softirq, wrk.
	CPU, Machine, Softirq, Client float64
	PeakKiB                       float64 // VmHWM
	Errors                        int64
}

// readC10k parses scripts/c10k-mem.sh's table (lab.C10k) into cells
// sorted by mode, then in the order the servers first appear.
func readC10k(r io.Reader) ([]c10kCell, error) {
	recs, err := lab.ReadTSV(r, lab.C10k)
	if err != nil {
		return nil, err
	}
	f := rounds{schema: lab.C10k}.field
	keys, groups := groupRounds(lab.C10k, recs, func(rec []string) [3]string {
		return [3]string{f(rec, "mode"), f(rec, "server"), f(rec, "backend")}
	})
	slices.SortStableFunc(keys, func(a, b [3]string) int { return cmpIn(modeOrder, a[0], b[0]) })
	var out []c10kCell
	for _, k := range keys {
		rs := groups[k]
		out = append(out, c10kCell{Mode: k[0], Server: k[1], Backend: k[2], Runs: len(rs.recs),
			RPS: rs.median("req_s"), CPU: rs.median("cpu_us_per_req"), Machine: rs.median("machine_cpu_us_per_req"),
			Softirq: rs.median("softirq_us_per_req"), Client: rs.median("client_cpu_us_per_req"),
			PeakKiB: rs.median("vmhwm_kib"), Errors: rs.sum("errors")})
	}
	return out, nil
}

// c10kLabel names a cell's server: "epoll" or "io_uring" when the run has
// one twinloop binary, "old epoll" when it has two; nginx by its workers.
func c10kLabel(cells []c10kCell, c c10kCell) string {
	if c.Server == "nginx" {
		return "nginx, 1 worker"
	}
	b := labelOr(bodyBackendLabels, c.Backend)
	if len(firstSeen(slices.DeleteFunc(slices.Clone(cells), func(c c10kCell) bool { return c.Server == "nginx" }),
		func(c c10kCell) string { return c.Server })) > 1 {
		return c.Server + " " + b
	}
	return b
}

// runC10k writes dir's summary.md and c10k.png from c10k.tsv, the output
// of scripts/c10k-mem.sh.
func runC10k(dir string) error {
	return runMode(dir, "c10k.tsv", "c10k.png", readC10k, c10kPanels, c10kMD)
}

func c10kMD(cells []c10kCell, run, env string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Many connections: %s\n\n", run)
	b.WriteString("Written by `scripts/plot -c10k` from `c10k.tsv`, the output of `scripts/c10k-mem.sh`\n")
	b.WriteString("(one row per server, mode and run; its header comment says how each column is measured,\n")
	b.WriteString("and README.md how this run was made). Medians over the runs; errors summed. CPU columns\n")
	b.WriteString("are µs per request: the server process, the whole machine (every CPU, softirq included),\n")
	b.WriteString("softirq alone and wrk. The last column is the whole machine's ÷ the first epoll row's.\n\n")
	if env != "" {
		b.WriteString("```\n" + strings.TrimSpace(env) + "\n```\n\n")
	}
	b.WriteString("| mode | server | runs | req/s | server CPU | whole machine | softirq | wrk | peak RSS KiB | errors | machine ÷ epoll |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	prev := ""
	for _, c := range cells {
		base := math.NaN()
		if i := slices.IndexFunc(cells, func(e c10kCell) bool { return e.Mode == c.Mode && e.Backend == "epoll" }); i >= 0 {
			base = cells[i].Machine
		}
		mode := groupLabel(&prev, c.Mode, nil)
		if mode != "" {
			mode = modeLabel(mode)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %d | %s |\n",
			mode, c10kLabel(cells, c), c.Runs, thousands(c.RPS),
			fmtNum(c.CPU, "%.2f"), fmtNum(c.Machine, "%.2f"), fmtNum(c.Softirq, "%.2f"), fmtNum(c.Client, "%.2f"),
			thousands(c.PeakKiB), c.Errors, fmtNum(c.Machine/base, "%.2f"))
	}
	b.WriteString("\n![c10k](c10k.png)\n\n")
	b.WriteString("A panel per mode: for each server, CPU-µs per request of the whole machine, of the server\n")
	b.WriteString("process and of softirq (medians).\n")
	return b.Bytes()
}

// c10kPanels: a panel per mode, bars grouped by server: whole-machine,
// server and softirq CPU-µs per request.
func c10kPanels(cells []c10kCell) [][]*plot.Plot {
	measures := []struct {
		label string
		f     func(c10kCell) float64
	}{
		{"whole machine", func(c c10kCell) float64 { return c.Machine }},
		{"server process", func(c c10kCell) float64 { return c.CPU }},
		{"softirq", func(c c10kCell) float64 { return c.Softirq }},
	}
	const barW = 9 * vg.Millimeter
	var row []*plot.Plot
	for _, mode := range firstSeen(cells, func(c c10kCell) string { return c.Mode }) {
		var cs []c10kCell
		for _, c := range cells {
			if c.Mode == mode {
				cs = append(cs, c)
			}
		}
		p := newPlot("CPU-µs per request, "+modeLabel(mode), "", "CPU-µs per request (median)")
		labels := make([]string, len(cs))
		for i, c := range cs {
			labels[i] = c10kLabel(cells, c)
		}
		names := make([]string, len(measures))
		vs := make([][]float64, len(measures))
		for m, ms := range measures {
			names[m] = ms.label
			for _, c := range cs {
				vs[m] = append(vs[m], ms.f(c))
			}
		}
		if groupedBars(p, names, vs, barW) == 0 {
			noData(p)
		}
		p.NominalX(labels...)
		roomForLegend(p)
		row = append(row, p)
	}
	return [][]*plot.Plot{row}
}
