package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twinloop/twinloop/scripts/lab"
)

// key names a cell of the grid: one server configuration under one load.
type key struct {
	Backend string
	Loops   int
	Conns   int
	Mode    string // keepalive, close, pipeline16
	Size    string // 1500, 64k, 1m
}

// server is a backend with its loop (or nginx worker) count.
type server struct {
	Backend string
	Loops   int
}

func (k key) server() server { return server{k.Backend, k.Loops} }

// Label is how plots and tables name a server: "epoll/1", "nginx/2".
func (s server) Label() string {
	if s.Backend == "gohttp" || s.Backend == "fasthttp" {
		return s.Backend // GOMAXPROCS 1, no loop count
	}
	return fmt.Sprintf("%s/%d", s.Backend, s.Loops)
}

// row is one measured run.
type row struct {
	key
	Run            int
	RPS, P50, P99  float64
	Errors, Non2xx int64
	CPU, Syscalls  float64 // NaN when not measured
	Method         string
	PeakRSS        float64 // kB, VmHWM; NaN when not measured
}

// cell is the runs of one key, reduced: medians, and errors summed, so
// that a single failing run is not hidden by the median.
type cell struct {
	key
	Runs           int
	RPS, P50, P99  float64
	Errors, Non2xx int64
	CPU, Syscalls  float64
	Method         string
	PeakRSS        float64 // kB
}

// readRows parses summary.csv.
func readRows(r io.Reader) ([]row, error) {
	// The schema scripts/wrkparse writes for scripts/bench.sh.
	recs, err := lab.ReadCSV(r, lab.Summary)
	if err != nil {
		return nil, err
	}
	rows := make([]row, 0, len(recs))
	for i, rec := range recs {
		var p fieldParser
		rw := row{
			key: key{
				Backend: rec[0],
				Loops:   p.int(rec[1]),
				Conns:   p.int(rec[2]),
				Mode:    rec[3],
				Size:    rec[4],
			},
			Run:      p.int(rec[5]),
			RPS:      p.float(rec[6]),
			P50:      p.float(rec[7]),
			P99:      p.float(rec[8]),
			Errors:   int64(p.int(rec[9])),
			Non2xx:   int64(p.int(rec[10])),
			CPU:      p.float(rec[11]),
			Syscalls: p.float(rec[12]),
			Method:   rec[13],
			PeakRSS:  p.float(rec[14]),
		}
		if p.err != nil {
			return nil, fmt.Errorf("line %d: %w", i+2, p.err)
		}
		rows = append(rows, rw)
	}
	return rows, nil
}

// fieldParser keeps the first error, so a row parses in one expression.
type fieldParser struct{ err error }

func (p *fieldParser) int(s string) int {
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil && p.err == nil {
		p.err = err
	}
	return n
}

// float reads an empty field (a measurement that failed or was not
// made) as NaN.
func (p *fieldParser) float(s string) float64 {
	if s == "" {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && p.err == nil {
		p.err = err
	}
	return f
}

// reduce groups the runs by key, in the order of sortCells.
func reduce(rows []row) []cell {
	byKey := map[key][]row{}
	for _, r := range rows {
		byKey[r.key] = append(byKey[r.key], r)
	}
	cells := make([]cell, 0, len(byKey))
	for k, rs := range byKey {
		c := cell{key: k, Runs: len(rs), Method: rs[0].Method}
		pick := func(f func(row) float64) float64 {
			vs := make([]float64, 0, len(rs))
			for _, r := range rs {
				vs = append(vs, f(r))
			}
			return median(vs)
		}
		c.RPS = pick(func(r row) float64 { return r.RPS })
		c.P50 = pick(func(r row) float64 { return r.P50 })
		c.P99 = pick(func(r row) float64 { return r.P99 })
		c.CPU = pick(func(r row) float64 { return r.CPU })
		c.Syscalls = pick(func(r row) float64 { return r.Syscalls })
		c.PeakRSS = pick(func(r row) float64 { return r.PeakRSS })
		for _, r := range rs {
			c.Errors += r.Errors
			c.Non2xx += r.Non2xx
		}
		cells = append(cells, c)
	}
	sortCells(cells)
	return cells
}

// median of the values that are not NaN; NaN if there are none.
func median(vs []float64) float64 {
	vs = slices.DeleteFunc(slices.Clone(vs), math.IsNaN)
	if len(vs) == 0 {
		return math.NaN()
	}
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// Orders of the grid's dimensions, for tables and plots; values not
// listed sort after these, alphabetically.
var (
	backendOrder = []string{"epoll", "uring", "nginx", "gnet", "fasthttp", "gohttp"}
	modeOrder    = []string{"keepalive", "close", "pipeline16"}
	sizeOrder    = []string{"1500", "64k", "1m"}
)

func rank(order []string, v string) int {
	if i := slices.Index(order, v); i >= 0 {
		return i
	}
	return len(order)
}

func cmpIn(order []string, a, b string) int {
	return cmp.Or(cmp.Compare(rank(order, a), rank(order, b)), strings.Compare(a, b))
}

func cmpServer(a, b server) int {
	return cmp.Or(cmpIn(backendOrder, a.Backend, b.Backend), cmp.Compare(a.Loops, b.Loops))
}

// sortCells orders by size, mode, connections, then server.
func sortCells(cells []cell) {
	slices.SortFunc(cells, func(a, b cell) int {
		return cmp.Or(
			cmpIn(sizeOrder, a.Size, b.Size),
			cmpIn(modeOrder, a.Mode, b.Mode),
			cmp.Compare(a.Conns, b.Conns),
			cmpServer(a.server(), b.server()),
		)
	})
}

// grid is the reduced results with the lookups the plots need.
type grid struct {
	cells []cell
	at    map[key]cell
}

func newGrid(rows []row) *grid {
	g := &grid{cells: reduce(rows), at: map[key]cell{}}
	for _, c := range g.cells {
		g.at[c.key] = c
	}
	return g
}

// mainServers are the servers of the main grid: bench.sh runs them with
// Connection: close too, while the loops sweep runs keep-alive only. A
// CSV without close cells has all its servers taken as main.
func (g *grid) mainServers() []server {
	var all, withClose []server
	for _, c := range g.cells {
		s := c.server()
		if !slices.Contains(all, s) {
			all = append(all, s)
		}
		if c.Mode == "close" && !slices.Contains(withClose, s) {
			withClose = append(withClose, s)
		}
	}
	out := withClose
	if len(out) == 0 {
		out = all
	}
	slices.SortFunc(out, cmpServer)
	return out
}

// values lists the distinct values of one dimension among cells, in order.
func values[T cmp.Ordered](cells []cell, f func(cell) T, order func(a, b T) int) []T {
	var out []T
	for _, c := range cells {
		if v := f(c); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, order)
	return out
}

func (g *grid) sizes() []string {
	return values(g.cells, func(c cell) string { return c.Size }, func(a, b string) int { return cmpIn(sizeOrder, a, b) })
}

func (g *grid) conns() []int {
	return values(g.cells, func(c cell) int { return c.Conns }, cmp.Compare[int])
}

// modes lists the modes present, the pipelined one only if withPipeline.
func (g *grid) modes(withPipeline bool) []string {
	var out []string
	for _, m := range values(g.cells, func(c cell) string { return c.Mode }, func(a, b string) int { return cmpIn(modeOrder, a, b) }) {
		if m == "pipeline16" && !withPipeline {
			continue
		}
		out = append(out, m)
	}
	return out
}

// sizeLabel is a size for people: "1500 B", "64 KiB", "1 MiB".
func sizeLabel(s string) string {
	switch s {
	case "1500":
		return "1500 B"
	case "64k":
		return "64 KiB"
	case "1m":
		return "1 MiB"
	}
	return s
}

// modeLabel is a mode for people.
func modeLabel(m string) string {
	switch m {
	case "keepalive":
		return "keep-alive"
	case "close":
		return "Connection: close"
	case "pipeline16":
		return "pipelined x16"
	}
	return m
}

func sortBackends(bs []string) {
	slices.SortFunc(bs, func(a, b string) int { return cmpIn(backendOrder, a, b) })
}

// firstSeen lists key of each of xs, once, in the order they first appear.
func firstSeen[T any, K comparable](xs []T, key func(T) K) []K {
	var out []K
	for _, x := range xs {
		if k := key(x); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// parseNum is a CSV field as a number; an empty or bad field is NaN.
func parseNum(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// rounds are the CSV records of one cell (several rounds of it) in
// schema's columns, reduced column by column.
type rounds struct {
	schema []string
	recs   [][]string
}

func (rs rounds) field(rec []string, name string) string {
	return rec[slices.Index(rs.schema, name)]
}

// median of the named column over the rounds (NaN fields left out).
func (rs rounds) median(name string) float64 {
	var vs []float64
	for _, r := range rs.recs {
		vs = append(vs, parseNum(rs.field(r, name)))
	}
	return median(vs)
}

// spread is the lowest and highest value of the named column over the
// rounds (NaN fields left out; NaN, NaN if all are).
func (rs rounds) spread(name string) (lo, hi float64) {
	lo, hi = math.NaN(), math.NaN()
	for _, r := range rs.recs {
		v := parseNum(rs.field(r, name))
		if !(v >= lo) && !math.IsNaN(v) { // the first value, or a lower one
			lo = v
		}
		if !(v <= hi) && !math.IsNaN(v) {
			hi = v
		}
	}
	return lo, hi
}

// sum of the named integer column over the rounds (bad fields as 0).
func (rs rounds) sum(name string) int64 {
	var n int64
	for _, r := range rs.recs {
		v, _ := strconv.ParseInt(rs.field(r, name), 10, 64)
		n += v
	}
	return n
}

// groupRounds groups recs (of schema) by key, the keys in the order they
// first appear.
func groupRounds[K comparable](schema []string, recs [][]string, key func(rec []string) K) ([]K, map[K]rounds) {
	groups := map[K]rounds{}
	var keys []K
	for _, rec := range recs {
		k := key(rec)
		g, ok := groups[k]
		if !ok {
			keys = append(keys, k)
			g.schema = schema
		}
		g.recs = append(g.recs, rec)
		groups[k] = g
	}
	return keys, groups
}
