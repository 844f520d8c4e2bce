package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twinloop/twinloop/scripts/lab"
	"golang.org/x/perf/benchmath"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// rateCell is one (server, offered rate) of make fixed-rate, reduced over
// its rounds: medians of the measured columns, errors and non-2xx summed,
// saturated when any round was.
type rateCell struct {
	Server                        string
	Rate                          float64 // offered, req/s
	Rounds                        int
	Achieved                      float64 // req/s
	P50, P99, P999                float64 // ms from the intended send time
	CPU, Machine, Softirq, Client float64 // µs per request
	Errors                        int64
	Saturated                     bool
	// A scripts/labrun run's (fromLabrun): the legend's label, and the
	// 95% intervals (lo, hi) of P50, P99, P999 and Machine, drawn as
	// error bars; zero when there are none (the bash lab's, n < 6).
	Label                       string
	P50I, P99I, P999I, MachineI [2]float64
}

// fixedRateServers are scripts/fixed-rate.sh's SERVERS, in its order;
// others sort after them by name.
var fixedRateServers = []string{"epoll", "uring", "gnet", "nginx"}

var fixedRateLabels = map[string]string{
	"epoll": "twinloop epoll", "uring": "twinloop io_uring",
	"gnet": "gnet, 1 loop", "nginx": "nginx, 1 worker",
}

// readFixedRate parses make fixed-rate's summary.csv (lab.FixedRate) into
// cells sorted by server, then offered rate.
func readFixedRate(r io.Reader) ([]rateCell, error) {
	recs, err := lab.ReadCSV(r, lab.FixedRate)
	if err != nil {
		return nil, err
	}
	type key struct {
		server string
		rate   float64
	}
	var bad error
	keys, groups := groupRounds(lab.FixedRate, recs, func(rec []string) key {
		f := rounds{schema: lab.FixedRate}.field
		rate, err := strconv.ParseFloat(f(rec, "rate_offered"), 64)
		if err != nil && bad == nil {
			bad = fmt.Errorf("rate_offered %q is not a number", f(rec, "rate_offered"))
		}
		return key{f(rec, "server"), rate}
	})
	if bad != nil {
		return nil, bad
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmpIn(fixedRateServers, a.server, b.server), cmp.Compare(a.rate, b.rate))
	})
	var out []rateCell
	for _, k := range keys {
		rs := groups[k]
		c := rateCell{Server: k.server, Rate: k.rate, Rounds: len(rs.recs),
			Achieved: rs.median("rate_achieved"),
			P50:      rs.median("p50_us") / 1000, P99: rs.median("p99_us") / 1000, P999: rs.median("p999_us") / 1000,
			CPU: rs.median("cpu_us_per_req"), Machine: rs.median("machine_cpu_us_per_req"),
			Softirq: rs.median("softirq_us_per_req"), Client: rs.median("client_cpu_us_per_req"),
			Errors: rs.sum("errors") + rs.sum("non2xx"), Saturated: rs.sum("saturated") > 0}
		out = append(out, c)
	}
	return out, nil
}

// runFixedRate writes dir's summary.md and fixed-rate.png from
// summary.csv.
func runFixedRate(dir string) error {
	return runMode(dir, "summary.csv", "fixed-rate.png", readFixedRate, fixedRatePanels, fixedRateMD)
}

func fixedRateMD(cells []rateCell, run, env string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Fixed-rate load: %s\n\n", run)
	b.WriteString("Written by `scripts/plot -fixedrate` from `summary.csv` (one row per server, offered rate\n")
	b.WriteString("and round); made by `make fixed-rate` (`scripts/fixed-rate.sh`, whose header says how each\n")
	b.WriteString("column is measured). Open loop: latency in ms from each request's intended send time;\n")
	b.WriteString("CPU-µs per completed request of the server, the whole machine (every CPU, softirq\n")
	b.WriteString("included), softirq alone and loadgen. Medians over the rounds; errors and non-2xx summed.\n")
	b.WriteString("Saturated: a round achieved under 95% of the offered rate or left over 1% of its requests\n")
	b.WriteString("unsent; the server ran at no higher rate.\n\n")
	b.WriteString("```\n" + strings.TrimSpace(env) + "\n```\n\n")
	b.WriteString("| server | offered req/s | rounds | achieved req/s | p50 ms | p99 ms | p99.9 ms | server CPU-µs/req | machine CPU-µs/req | softirq CPU-µs/req | loadgen CPU-µs/req | errors + non-2xx | saturated |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	prev := ""
	for _, c := range cells {
		srv := groupLabel(&prev, c.Server, fixedRateLabels)
		sat := "no"
		if c.Saturated {
			sat = "yes"
		}
		fmt.Fprintf(&b, "| %s | %.0f | %d | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n",
			srv, c.Rate, c.Rounds, fmtNum(c.Achieved, "%.0f"),
			fmtNum(c.P50, "%.3f"), fmtNum(c.P99, "%.3f"), fmtNum(c.P999, "%.3f"),
			fmtNum(c.CPU, "%.2f"), fmtNum(c.Machine, "%.2f"), fmtNum(c.Softirq, "%.2f"), fmtNum(c.Client, "%.2f"),
			c.Errors, sat)
	}
	b.WriteString("\n![fixed-rate](fixed-rate.png)\n\n")
	b.WriteString("Against the offered rate, a line per server through the rates it kept up with: p99, p50\n")
	b.WriteString("and p99.9 latency from the intended send time (log scale), and CPU-µs per request of the\n")
	b.WriteString("whole machine (solid) and of the server (dashed). A rate at which the server saturated is\n")
	b.WriteString("drawn as a ringed point, not joined to the line: its latency is the queue the run left\n")
	b.WriteString("behind, and grows with the run's length.\n")
	return b.Bytes()
}

// fixedRatePanels: p99 latency and CPU-µs per request above, p50 and
// p99.9 latency below, each against the offered rate with a line per
// server; saturated rates are ringed points off the line.
func fixedRatePanels(cells []rateCell) [][]*plot.Plot {
	servers := firstSeen(cells, func(c rateCell) string { return c.Server })
	label := func(server string) string {
		for _, c := range cells {
			if c.Server == server && c.Label != "" {
				return c.Label
			}
		}
		return labelOr(fixedRateLabels, server)
	}
	const xLabel = "offered rate, thousand req/s"
	// series draws f of server i's cells: a line through the unsaturated
	// rates, ringed points at the saturated ones; the legend names it
	// when label is not empty. It reports whether any point is saturated.
	series := func(p *plot.Plot, i int, label string, f func(rateCell) float64, iv func(rateCell) [2]float64, dashes []vg.Length) bool {
		var line, sat, bars plotter.XYs
		var errs plotter.YErrors
		for _, c := range cells {
			v := f(c)
			if c.Server != servers[i] || !(v > 0) { // NaN and 0 have no place on a log axis
				continue
			}
			xy := plotter.XY{X: c.Rate / 1000, Y: v}
			if c.Saturated {
				sat = append(sat, xy)
			} else {
				line = append(line, xy)
			}
			if iv != nil {
				if b := iv(c); b[0] > 0 && b[1] >= b[0] && !math.IsInf(b[1], 0) {
					bars = append(bars, xy)
					errs = append(errs, struct{ Low, High float64 }{v - b[0], b[1] - v})
				}
			}
		}
		addYErrors(p, i, bars, errs)
		var thumbs []plot.Thumbnailer
		if l, pts, err := plotter.NewLinePoints(line); err == nil {
			l.Color, l.Dashes = plotutil.Color(i), dashes
			pts.Color, pts.Shape = plotutil.Color(i), plotutil.Shape(i)
			p.Add(l, pts)
			thumbs = append(thumbs, l, pts)
		}
		if s, err := plotter.NewScatter(sat); err == nil {
			s.Color, s.Shape = plotutil.Color(i), plotutil.Shape(i)
			ring := *s
			ring.Shape, ring.Radius = draw.RingGlyph{}, 2.4*s.Radius
			p.Add(s, &ring)
			if len(thumbs) == 0 {
				thumbs = append(thumbs, s)
			}
		}
		if label != "" && len(thumbs) > 0 {
			p.Legend.Add(label, thumbs...)
		}
		return len(sat) > 0
	}
	satLegend := func(p *plot.Plot) {
		s, _ := plotter.NewScatter(plotter.XYs{{}})
		s.Shape, s.Radius = draw.RingGlyph{}, 1.6*s.Radius // smaller than in the panel: the legend's line is short
		p.Legend.Add("saturated (not joined)", s)
	}
	latency := func(what string, f func(rateCell) float64, iv func(rateCell) [2]float64) *plot.Plot {
		p := newPlot(what+" latency from intended send", xLabel, "ms (log)")
		p.Legend.Left = true
		anySat := false
		for i, s := range servers {
			anySat = series(p, i, label(s), f, iv, nil) || anySat
		}
		if anySat {
			satLegend(p)
		}
		logY(p)
		p.X.Min = 0
		return p
	}
	cpu := newPlot("CPU-µs per request: machine (solid), server (dashed)", xLabel, "CPU-µs per request")
	anySat := false
	for i, s := range servers {
		anySat = series(cpu, i, label(s), func(c rateCell) float64 { return c.Machine }, func(c rateCell) [2]float64 { return c.MachineI }, nil) || anySat
		series(cpu, i, "", func(c rateCell) float64 { return c.CPU }, nil, []vg.Length{vg.Points(5), vg.Points(3)})
	}
	if anySat {
		satLegend(cpu)
	}
	if cpu.Y.Max <= 0 {
		noData(cpu)
	}
	roomForLegend(cpu)
	cpu.Y.Max *= 1.3 // the legend has a line more than the latency panels'
	cpu.X.Min = 0
	return [][]*plot.Plot{
		{latency("p99", func(c rateCell) float64 { return c.P99 }, func(c rateCell) [2]float64 { return c.P99I }), cpu},
		{latency("p50", func(c rateCell) float64 { return c.P50 }, func(c rateCell) [2]float64 { return c.P50I }),
			latency("p99.9", func(c rateCell) float64 { return c.P999 }, func(c rateCell) [2]float64 { return c.P999I })},
	}
}

// logY puts p's y axis on a log scale (its data must be positive) that
// spans at least a decade, with the top 40% left to the legend; a panel
// with no data says so and stays linear.
func logY(p *plot.Plot) {
	lo, hi := p.Y.Min, p.Y.Max
	if !(lo > 0 && hi > 0) {
		noData(p)
		return
	}
	if hi < 10*lo {
		mid := math.Sqrt(lo * hi)
		lo, hi = mid/math.Sqrt(10), mid*math.Sqrt(10)
	}
	lo /= 1.2
	p.Y.Min, p.Y.Max = lo, lo*math.Pow(hi/lo, 1/0.6)
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
}

// logTicks marks 1-9 × 10^k, labelling 1, 2 and 5 (only 1 when the axis
// spans more than three decades): plot.LogTicks labels powers of ten
// only, and a panel within one decade would have one label or none.
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []plot.Tick {
	wide := max/min > 1000
	var ts []plot.Tick
	for e := int(math.Floor(math.Log10(min))) - 1; e <= int(math.Ceil(math.Log10(max))); e++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow10(e)
			if e < 0 {
				v = float64(m) / math.Pow10(-e) // exact decimals: 0.3, not 0.30000000000000004
			}
			if v < min || v > max {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (!wide && (m == 2 || m == 5)) {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// fromLabrun is a scripts/labrun run's rate:N cells as rateCells, in
// ms as the bash lab's, each with its 95% intervals: the server is the
// step's id without its "-r<rate>" (et-r1000: et), so that a steps
// file's cells of one server at several rates make one line, labelled
// by its kind (twinloop epoll) or, for a kind drawn twice, by that id.
func fromLabrun(r lab.Run) []rateCell {
	rcs := r.RateCells()
	kinds := map[string]map[string]bool{} // kind -> its servers
	server := func(c lab.RateCell) string { return strings.TrimSuffix(c.Step, fmt.Sprintf("-r%d", c.Rate)) }
	for _, c := range rcs {
		if kinds[c.Kind] == nil {
			kinds[c.Kind] = map[string]bool{}
		}
		kinds[c.Kind][server(c)] = true
	}
	ms := func(s benchmath.Summary) (float64, [2]float64) {
		if math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0) {
			return s.Center / 1000, [2]float64{}
		}
		return s.Center / 1000, [2]float64{s.Lo / 1000, s.Hi / 1000}
	}
	var out []rateCell
	for _, c := range rcs {
		rc := rateCell{Server: server(c), Rate: float64(c.Rate), Rounds: c.N, Achieved: c.Achieved.Center,
			CPU: c.CPU.Center, Machine: c.Machine.Center, Softirq: math.NaN(), Client: math.NaN(), Saturated: c.Saturated > 0}
		if !math.IsInf(c.Machine.Lo, 0) && !math.IsInf(c.Machine.Hi, 0) {
			rc.MachineI = [2]float64{c.Machine.Lo, c.Machine.Hi}
		}
		rc.P50, rc.P50I = ms(c.P50)
		rc.P99, rc.P99I = ms(c.P99)
		rc.P999, rc.P999I = ms(c.P999)
		rc.Label = labelOr(fixedRateLabels, c.Kind)
		if len(kinds[c.Kind]) > 1 {
			rc.Label = rc.Server
		}
		out = append(out, rc)
	}
	return out
}
