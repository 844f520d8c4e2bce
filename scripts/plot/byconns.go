package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/twinloop/twinloop/scripts/lab"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

// series is one server's cells at several connection counts: the steps
// of a run with the same kind, mode and size, A/A twins left out.
type series struct {
	name  string
	steps map[int]string // connections → step
}

// connsSeries finds, in a labrun run, the servers measured at two or
// more connection counts. A kind, mode and size with two steps at the
// same count (a flag's variant beside the default) is not one line: it is
// left out.
func connsSeries(r lab.Run) []series {
	at := func(name string) int { return slices.Index(lab.Rounds, name) }
	step, label, kind, conns := at("step"), at("label"), at("kind"), at("conns")
	mode, size := at("mode"), at("size")
	var out []series
	idx := map[string]int{}
	mixed := map[string]bool{}
	for _, row := range r.Rows {
		if strings.HasPrefix(row[label], "A/A") {
			continue
		}
		key := row[kind] + " " + row[mode] + " " + row[size]
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, series{name: key, steps: map[int]string{}})
		}
		c := atoi(row[conns])
		if s, ok := out[i].steps[c]; ok && s != row[step] {
			mixed[key] = true
		}
		out[i].steps[c] = row[step]
	}
	return slices.DeleteFunc(out, func(s series) bool { return mixed[s.name] || len(s.steps) < 2 })
}

func atoi(s string) int {
	var n int
	fmt.Sscanf(s, "%d", &n)
	return n
}

// connsPanels draws CPU per request against connections (log scale), a
// line per server of connsSeries with each point's 95% interval: the
// whole machine's on the left, the server process's on the right. Nil
// when fewer than two servers were measured at two or more counts.
func connsPanels(r lab.Run) [][]*plot.Plot {
	ss := connsSeries(r)
	if len(ss) < 2 {
		return nil
	}
	metrics := []struct{ col, title string }{
		{"machine_cpu_us_per_req", "whole machine"},
		{"cpu_us_per_req", "server process"},
	}
	var row []*plot.Plot
	for _, m := range metrics {
		p := newPlot(m.title+": CPU per request (median, 95% interval)", "connections (log scale)", "CPU-µs per request")
		ivs := map[string]lab.Interval{}
		for _, iv := range r.Intervals(m.col) {
			ivs[iv.Step] = iv
		}
		for i, s := range ss {
			var xys plotter.XYs
			var errs plotter.YErrors
			for _, c := range sortedKeys(s.steps) {
				iv, ok := ivs[s.steps[c]]
				if !ok {
					continue
				}
				xys = append(xys, plotter.XY{X: float64(c), Y: iv.Center})
				lo, hi := iv.Center-iv.Lo, iv.Hi-iv.Center
				if math.IsInf(lo, 0) || math.IsInf(hi, 0) {
					lo, hi = 0, 0 // fewer than 6 rounds: no interval to draw
				}
				errs = append(errs, struct{ Low, High float64 }{lo, hi})
			}
			if len(xys) < 2 {
				continue
			}
			addLine(p, i, s.name, xys)
			addYErrors(p, i, xys, errs)
		}
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logTicks{}
		p.X.Min, p.X.Max = p.X.Min/1.5, p.X.Max*1.5
		roomForLegend(p)
		row = append(row, p)
	}
	return [][]*plot.Plot{row}
}

func sortedKeys(m map[int]string) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
