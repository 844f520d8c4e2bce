package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/twinloop/twinloop/scripts/lab"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// coldCell is one (set, server) of make cold, reduced over its rounds:
// medians of the measured columns, errors summed.
type coldCell struct {
	Set, Server                  string
	Rounds                       int
	HotP99, HotP50, HotRPS       float64 // ms, ms, req/s
	MBps, FilesPerS, CPUs, CPUus float64
	HotErrors, ColdErrors        int64
	HotNon2xx, ColdNon2xx        int64
}

// coldServers and coldSets are make cold's, in the tables' order; others
// sort after them by name.
var (
	coldServers = []string{"epoll", "uring", "nginx", "nginx-aio"}
	coldSets    = []string{"big", "small"}
)

var coldServerLabels = map[string]string{
	"epoll": "twinloop epoll", "uring": "twinloop io_uring",
	"nginx": "nginx, sendfile", "nginx-aio": "nginx, aio threads",
}

var coldSetLabels = map[string]string{"big": "128 files of 16 MiB", "small": "20,000 files of 16 KiB"}

func labelOr(m map[string]string, k string) string {
	if v, ok := m[k]; ok {
		return v
	}
	return k
}

// groupLabel is k's label where k starts a run of a table's rows (k is
// not *prev), and blank on the run's other rows; *prev becomes k.
func groupLabel(prev *string, k string, labels map[string]string) string {
	if k == *prev {
		return ""
	}
	*prev = k
	return labelOr(labels, k)
}

// readCold parses make cold's cold.csv (lab.Cold) into cells sorted by
// set, then server.
func readCold(r io.Reader) ([]coldCell, error) {
	recs, err := lab.ReadCSV(r, lab.Cold)
	if err != nil {
		return nil, err
	}
	col := func(name string) int { return slices.Index(lab.Cold, name) }
	keys, groups := groupRounds(lab.Cold, recs, func(rec []string) [2]string { return [2]string{rec[col("set")], rec[col("server")]} })
	slices.SortFunc(keys, func(a, b [2]string) int {
		if c := cmpIn(coldSets, a[0], b[0]); c != 0 {
			return c
		}
		return cmpIn(coldServers, a[1], b[1])
	})
	var out []coldCell
	for _, k := range keys {
		rs := groups[k]
		out = append(out, coldCell{Set: k[0], Server: k[1], Rounds: len(rs.recs),
			HotP99: rs.median("hot_p99_ms"), HotP50: rs.median("hot_p50_ms"), HotRPS: rs.median("hot_rps"),
			MBps: rs.median("cold_MBps"), FilesPerS: rs.median("cold_files_per_s"), CPUs: rs.median("cpu_s"), CPUus: rs.median("cpu_us_per_req"),
			HotErrors: rs.sum("hot_errors"), ColdErrors: rs.sum("cold_errors"),
			HotNon2xx: rs.sum("hot_non2xx"), ColdNon2xx: rs.sum("cold_non2xx")})
	}
	return out, nil
}

// runCold writes dir's summary.md and cold.png from cold.csv.
func runCold(dir string) error {
	return runMode(dir, "cold.csv", "cold.png", readCold, coldPanels, func(cells []coldCell, run, env string) []byte {
		thr, _ := os.ReadFile(filepath.Join(dir, "throttle.txt"))
		return coldMD(cells, run, env, string(thr))
	})
}

func coldMD(cells []coldCell, run, env, throttle string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Files from a throttled disk: %s\n\n", run)
	b.WriteString("Written by `scripts/plot -cold` from `cold.csv` (one row per server, cold set and round);\n")
	b.WriteString("made by `make cold` (`scripts/cold.sh`, whose --help says how each column is measured).\n")
	b.WriteString("Medians over the rounds; errors and non-2xx summed. The hot page is index.html (1500 B,\n")
	b.WriteString("cached), fetched by 4 connections while 16 fetch the cold set's files.\n\n")
	b.WriteString("```\n" + strings.TrimSpace(env) + "\n```\n\n")
	if throttle != "" {
		b.WriteString("```\n" + strings.TrimSpace(throttle) + "\n```\n\n")
	}
	b.WriteString("| cold set | server | rounds | hot page p99 ms | hot page p50 ms | hot page req/s | cold MB/s | cold files/s | server CPU s | CPU-µs/req | hot errors | cold errors | non-2xx |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	prev := ""
	for _, c := range cells {
		set := groupLabel(&prev, c.Set, coldSetLabels)
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %d | %d | %d |\n",
			set, labelOr(coldServerLabels, c.Server), c.Rounds,
			fmtNum(c.HotP99, "%.1f"), fmtNum(c.HotP50, "%.2f"), fmtNum(c.HotRPS, "%.0f"),
			fmtNum(c.MBps, "%.1f"), fmtNum(c.FilesPerS, "%.1f"), fmtNum(c.CPUs, "%.2f"), fmtNum(c.CPUus, "%.1f"),
			c.HotErrors, c.ColdErrors, c.HotNon2xx+c.ColdNon2xx)
	}
	b.WriteString("\n![cold](cold.png)\n")
	return b.Bytes()
}

// coldPanels: a row per cold set; the hot page's p99 and req/s (log
// scales: the servers differ by orders of magnitude) beside the cold
// throughput in MB/s and files/s, a horizontal bar per server.
func coldPanels(cells []coldCell) [][]*plot.Plot {
	sets := firstSeen(cells, func(c coldCell) string { return c.Set })
	bars := func(title string, cs []coldCell, f func(coldCell) float64, log bool) *plot.Plot {
		p := newPlot(title, "", "")
		labels := make([]string, len(cs))
		vs := make([]float64, len(cs))
		for i, c := range cs {
			labels[i], vs[i] = labelOr(coldServerLabels, c.Server), f(c)
		}
		hbars(p, labels, vs, 0.5*vg.Centimeter)
		if log {
			p.X.Scale = floorLog{}
			p.X.Tick.Marker = plot.LogTicks{Prec: -1}
			p.X.Min = 0.1
			for _, v := range vs {
				if v > p.X.Max/2 { // false for NaN
					p.X.Max = 2 * v
				}
			}
		} else {
			p.X.Min = 0
		}
		return p
	}
	var panels [][]*plot.Plot
	for _, s := range sets {
		var cs []coldCell
		for _, c := range cells {
			if c.Set == s {
				cs = append(cs, c)
			}
		}
		name := labelOr(coldSetLabels, s)
		panels = append(panels, []*plot.Plot{
			bars("hot page p99, ms (log): "+name, cs, func(c coldCell) float64 { return c.HotP99 }, true),
			bars("hot page req/s (log): "+name, cs, func(c coldCell) float64 { return c.HotRPS }, true),
			bars("cold MB/s: "+name, cs, func(c coldCell) float64 { return c.MBps }, false),
			bars("cold files/s: "+name, cs, func(c coldCell) float64 { return c.FilesPerS }, false),
		})
	}
	return panels
}

// floorLog is a log scale that draws values below the axis' minimum at
// the minimum: a bar starts at 0, which plot.LogScale refuses.
type floorLog struct{}

func (floorLog) Normalize(min, max, x float64) float64 {
	return plot.LogScale{}.Normalize(min, max, math.Max(x, min))
}
