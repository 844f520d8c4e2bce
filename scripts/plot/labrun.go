package main

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"github.com/twinloop/twinloop/scripts/lab"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// runLabrun rewrites a scripts/labrun folder's summary.md (the driver's
// own code, scripts/lab.Summarize) and draws intervals.png: each cell's
// median and 95% interval of the whole machine's CPU per request and of
// req/s, one row of panels per connection count; where two or more
// servers ran at several connection counts, by-conns.png (CPU per
// request against connections: byconns.go); for a run with rate:N
// cells (fixed-rate.steps) also fixed-rate.png, latency percentiles and
// CPU per request against the offered rate (fixedrate.go).
func runLabrun(dir string) error {
	if err := lab.Summarize(dir); err != nil {
		return err
	}
	r, err := lab.ReadRun(dir)
	if err != nil {
		return err
	}
	if err := savePNG(filepath.Join(dir, "intervals.png"), labrunPanels(r)); err != nil {
		return err
	}
	if panels := connsPanels(r); panels != nil {
		if err := savePNG(filepath.Join(dir, "by-conns.png"), panels); err != nil {
			return err
		}
	}
	if cells := fromLabrun(r); len(cells) > 0 {
		panels := fixedRatePanels(cells)
		// fixed-rate.steps' rates span two decades (1,000 to 80,000
		// req/s): on a linear axis the low ones would share a point.
		lo := math.Inf(1)
		for _, c := range cells {
			lo = min(lo, c.Rate/1000)
		}
		for _, row := range panels {
			for _, p := range row {
				p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logTicks{}
				p.X.Min, p.X.Max = lo/1.3, max(p.X.Max*1.3, lo*10)
			}
		}
		return savePNG(filepath.Join(dir, "fixed-rate.png"), panels)
	}
	return nil
}

func labrunPanels(r lab.Run) [][]*plot.Plot {
	metrics := []struct{ col, title, unit string }{
		{"machine_cpu_us_per_req", "whole-machine CPU per request", "CPU-µs per request"},
		{"rps", "requests per second", "req/s"},
	}
	var conns []int
	for _, iv := range r.Intervals("rps") {
		if !slices.Contains(conns, iv.Conns) {
			conns = append(conns, iv.Conns)
		}
	}
	if len(conns) == 0 {
		conns = []int{0}
	}
	var rows [][]*plot.Plot
	for _, c := range conns {
		var row []*plot.Plot
		for _, m := range metrics {
			p := newPlot(fmt.Sprintf("%s, c=%d (median, 95%% interval)", m.title, c), m.unit, "")
			var labels []string
			var xys plotter.XYs
			var errs plotter.XErrors
			for _, iv := range r.Intervals(m.col) {
				if iv.Conns != c {
					continue
				}
				labels = append(labels, iv.Step)
				xys = append(xys, plotter.XY{X: iv.Center})
				lo, hi := iv.Center-iv.Lo, iv.Hi-iv.Center
				if math.IsInf(lo, 0) || math.IsInf(hi, 0) {
					lo, hi = 0, 0 // fewer than 6 rounds: no interval to draw
				}
				errs = append(errs, struct{ Low, High float64 }{lo, hi})
			}
			if len(xys) == 0 {
				noData(p)
				row = append(row, p)
				continue
			}
			// The first cell on top, as summary.md lists them.
			n := len(labels)
			top := make([]string, n)
			for i := range xys {
				xys[i].Y = float64(n - 1 - i)
				top[n-1-i] = labels[i]
			}
			p.NominalY(top...)
			if pts, err := plotter.NewScatter(xys); err == nil {
				pts.Color, pts.Shape = plotutil.Color(0), plotutil.Shape(0)
				p.Add(pts)
			}
			if eb, err := plotter.NewXErrorBars(struct {
				plotter.XYs
				plotter.XErrors
			}{xys, errs}); err == nil {
				eb.Color = plotutil.Color(0)
				p.Add(eb)
			}
			p.X.Min = 0
			p.X.Max *= 1.05 // the widest point whole, not cut at the edge
			row = append(row, p)
		}
		rows = append(rows, row)
	}
	return rows
}
