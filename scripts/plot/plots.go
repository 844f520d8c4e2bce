package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// One panel's size; a figure is a grid of panels.
const (
	panelW = 5 * vg.Inch
	panelH = 3.6 * vg.Inch
)

// figure is one PNG: its file name and its panels, row-major.
type figure struct {
	name   string
	panels [][]*plot.Plot
}

// figures builds every plot the results folder gets.
func figures(g *grid) []figure {
	return []figure{
		{"rps_vs_conns.png", rpsVsConns(g)},
		{"syscalls_per_req.png", perRequest(g, "system calls per request", func(c cell) float64 { return c.Syscalls })},
		{"cpu_us_per_req.png", perRequest(g, "server CPU-µs per request", func(c cell) float64 { return c.CPU })},
		{"loops_scaling.png", loopsScaling(g)},
	}
}

// writePlots renders the figures as PNGs in dir and returns their names.
func writePlots(g *grid, dir string) ([]string, error) {
	var names []string
	for _, f := range figures(g) {
		if err := savePNG(filepath.Join(dir, f.name), f.panels); err != nil {
			return names, fmt.Errorf("%s: %w", f.name, err)
		}
		names = append(names, f.name)
	}
	return names, nil
}

// skipPNG leaves savePNG's files unwritten. Only TestCommittedSummariesRegenerate
// sets it: it checks the tables of every committed folder, and drawing
// their plots under the race detector takes half a minute.
var skipPNG bool

func savePNG(path string, panels [][]*plot.Plot) error {
	if skipPNG {
		return nil
	}
	rows, cols := len(panels), len(panels[0])
	img := vgimg.NewWith(vgimg.UseWH(vg.Length(cols)*panelW, vg.Length(rows)*panelH), vgimg.UseDPI(96))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: 4 * vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	canvases := plot.Align(panels, tiles, dc)
	for i := range panels {
		for j, p := range panels[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// addLine draws xys as the i-th series, with points, named label.
func addLine(p *plot.Plot, i int, label string, xys plotter.XYs) {
	l, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return // no finite points
	}
	l.Color = plotutil.Color(i)
	pts.Color = plotutil.Color(i)
	pts.Shape = plotutil.Shape(i)
	p.Add(l, pts)
	p.Legend.Add(label, l, pts)
}

// addYErrors draws errs around xys in the i-th series' colour.
func addYErrors(p *plot.Plot, i int, xys plotter.XYs, errs plotter.YErrors) {
	if eb, err := plotter.NewYErrorBars(struct {
		plotter.XYs
		plotter.YErrors
	}{xys, errs}); err == nil {
		eb.Color = plotutil.Color(i)
		p.Add(eb)
	}
}

// roomForLegend starts the y axis at 0 and leaves the top third of the
// panel to the legend, which is drawn over the data.
func roomForLegend(p *plot.Plot) {
	p.Y.Min = 0
	p.Y.Max *= 1.45
	if p.Y.Max <= 0 {
		p.Y.Max = 1
	}
}

// hbars adds one horizontal bar per label to p, the first label on top;
// a NaN value draws no bar.
func hbars(p *plot.Plot, labels []string, vs []float64, width vg.Length) *plotter.BarChart {
	n := len(labels)
	top := make([]string, n)
	vals := make(plotter.Values, n)
	for i, v := range vs {
		if math.IsNaN(v) {
			v = 0
		}
		top[n-1-i], vals[n-1-i] = labels[i], v
	}
	p.NominalY(top...)
	bc, err := plotter.NewBarChart(vals, width)
	if err != nil {
		return nil
	}
	bc.Horizontal = true
	bc.Color = plotutil.Color(0)
	p.Add(bc)
	return bc
}

// groupedBars adds a bar chart per series to p, side by side at each x
// position, named in the legend: vs[m][i] is series m's bar at position i
// (NaN: no bar). It returns how many bars it drew.
func groupedBars(p *plot.Plot, names []string, vs [][]float64, barW vg.Length) int {
	n := 0
	for m, name := range names {
		vals := make(plotter.Values, len(vs[m]))
		for i, v := range vs[m] {
			if !math.IsNaN(v) {
				vals[i] = v
				n++
			}
		}
		bc, err := plotter.NewBarChart(vals, barW)
		if err != nil {
			continue
		}
		bc.Color = plotutil.Color(m)
		bc.LineStyle.Width = 0
		bc.Offset = vg.Length(float64(m)-float64(len(names)-1)/2) * barW
		p.Add(bc)
		p.Legend.Add(name, bc)
	}
	return n
}

// noData marks an empty panel, so that it says so rather than looking broken.
func noData(p *plot.Plot) {
	p.Title.Text += " (no data)"
}

// rpsVsConns: req/s against connections, a line per main server; a panel
// per file size (rows) and mode (columns).
func rpsVsConns(g *grid) [][]*plot.Plot {
	conns := g.conns()
	labels := make([]string, len(conns))
	for i, c := range conns {
		labels[i] = strconv.Itoa(c)
	}
	var panels [][]*plot.Plot
	for _, size := range g.sizes() {
		var row []*plot.Plot
		for _, mode := range g.modes(false) {
			p := newPlot(fmt.Sprintf("req/s, %s, %s", modeLabel(mode), sizeLabel(size)), "connections", "requests/s (median)")
			n := 0
			for i, s := range g.mainServers() {
				var xys plotter.XYs
				for x, c := range conns {
					if cl, ok := g.at[key{s.Backend, s.Loops, c, mode, size}]; ok && !math.IsNaN(cl.RPS) {
						xys = append(xys, plotter.XY{X: float64(x), Y: cl.RPS})
					}
				}
				if len(xys) > 0 {
					addLine(p, i, s.Label(), xys)
					n++
				}
			}
			if n == 0 {
				noData(p)
			}
			p.NominalX(labels...)
			p.X.Min, p.X.Max = -0.5, float64(len(conns))-0.5
			roomForLegend(p)
			row = append(row, p)
		}
		panels = append(panels, row)
	}
	return panels
}

// perRequest: bars of one per-request figure, grouped by server with a bar
// per mode; a panel per file size (rows) and connection count (columns).
// A missing bar is a cell that was not measured.
func perRequest(g *grid, what string, f func(cell) float64) [][]*plot.Plot {
	servers := g.mainServers()
	labels := make([]string, len(servers))
	for i, s := range servers {
		labels[i] = s.Label()
	}
	modes := g.modes(true)
	const barW = 9 * vg.Millimeter
	var panels [][]*plot.Plot
	for _, size := range g.sizes() {
		var row []*plot.Plot
		for _, conns := range g.conns() {
			p := newPlot(fmt.Sprintf("%s, c=%d, %s", what, conns, sizeLabel(size)), "", what)
			names := make([]string, len(modes))
			vs := make([][]float64, len(modes))
			for m, mode := range modes {
				names[m] = modeLabel(mode)
				for _, s := range servers {
					v := math.NaN()
					if cl, ok := g.at[key{s.Backend, s.Loops, conns, mode, size}]; ok {
						v = f(cl)
					}
					vs[m] = append(vs[m], v)
				}
			}
			if groupedBars(p, names, vs, barW) == 0 {
				noData(p)
			}
			p.NominalX(labels...)
			roomForLegend(p)
			row = append(row, p)
		}
		panels = append(panels, row)
	}
	return panels
}

// loopsScaling: req/s and CPU-µs per request against loops (nginx:
// workers) at the loops sweep's cell, a line per backend measured with
// more than one loop count.
func loopsScaling(g *grid) [][]*plot.Plot {
	base := sweepKey(g)
	title := fmt.Sprintf("c=%d, keep-alive, %s", base.Conns, sizeLabel(base.Size))
	rps := newPlot("req/s by loops, "+title, "loops (nginx: workers)", "requests/s (median)")
	cpu := newPlot("CPU-µs/req by loops, "+title, "loops (nginx: workers)", "server CPU-µs per request")
	maxLoops, n := 1, 0
	for i, b := range backendsWithSweep(g, base) {
		var r, c plotter.XYs
		for _, cl := range g.cells {
			if cl.Backend != b || cl.Mode != base.Mode || cl.Size != base.Size || cl.Conns != base.Conns {
				continue
			}
			maxLoops = max(maxLoops, cl.Loops)
			if !math.IsNaN(cl.RPS) {
				r = append(r, plotter.XY{X: float64(cl.Loops), Y: cl.RPS})
			}
			if !math.IsNaN(cl.CPU) {
				c = append(c, plotter.XY{X: float64(cl.Loops), Y: cl.CPU})
			}
		}
		addLine(rps, i, b, r)
		addLine(cpu, i, b, c)
		n++
	}
	for _, p := range []*plot.Plot{rps, cpu} {
		if n == 0 {
			noData(p)
		}
		ticks := make(plot.ConstantTicks, 0, maxLoops)
		for l := 1; l <= maxLoops; l++ {
			ticks = append(ticks, plot.Tick{Value: float64(l), Label: strconv.Itoa(l)})
		}
		p.X.Tick.Marker = ticks
		p.X.Min, p.X.Max = 0.5, float64(maxLoops)+0.5
		roomForLegend(p)
	}
	return [][]*plot.Plot{{rps, cpu}}
}

// backendsWithSweep lists the backends with cells at more than one loop
// count for base's mode, size and connections (cells are sorted by loops).
func backendsWithSweep(g *grid, base key) []string {
	loops := map[string]map[int]bool{}
	var out []string
	for _, c := range g.cells {
		if c.Mode != base.Mode || c.Size != base.Size || c.Conns != base.Conns {
			continue
		}
		if loops[c.Backend] == nil {
			loops[c.Backend] = map[int]bool{}
		}
		loops[c.Backend][c.Loops] = true
		if len(loops[c.Backend]) == 2 {
			out = append(out, c.Backend)
		}
	}
	sortBackends(out)
	return out
}
