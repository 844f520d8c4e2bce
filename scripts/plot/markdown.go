package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Markers of the block of results/README.md that -readme rewrites.
const (
	latestBegin = "<!-- latest:begin: written by scripts/plot -readme; edit outside these markers -->"
	latestEnd   = "<!-- latest:end -->"
)

func fmtNum(v float64, format string) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

// perReq is a syscalls-per-request figure with how it was counted.
func perReq(c cell) string {
	if math.IsNaN(c.Syscalls) {
		return "–"
	}
	return fmt.Sprintf("%.2f (%s)", c.Syscalls, c.Method)
}

// summaryMD is summary.md: the run's environment, the plots, and the
// median tables.
func summaryMD(g *grid, run, env string, plots []string, haveSyscalls bool) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Benchmark run %s\n\n", run)
	b.WriteString("Written by `scripts/plot` from `summary.csv` (one row per run); see `results/README.md`\n")
	b.WriteString("for how to read it. Every figure is the median over a cell's runs, except errors and\n")
	b.WriteString("non-2xx, which are summed over them. A server is `backend/loops`: twinloop's event\n")
	b.WriteString("loops, or nginx's worker processes. Syscalls per request come from twinloop's own\n")
	b.WriteString("counters (the loops' calls only) or from perf/strace (every thread of the process):\n")
	b.WriteString("the method is in brackets.\n\n")
	if env != "" {
		b.WriteString("```\n" + strings.TrimRight(env, "\n") + "\n```\n\n")
	}
	if haveSyscalls {
		b.WriteString("Which system calls, by name: [syscalls.md](syscalls.md).\n\n")
	}
	for _, p := range plots {
		fmt.Fprintf(&b, "![%s](%s)\n\n", strings.TrimSuffix(p, ".png"), p)
	}

	main := g.mainServers()
	isMain := func(c cell) bool { return slices.Contains(main, c.server()) }
	b.WriteString("## Main grid\n\n")
	b.WriteString("| size | mode | conns | server | runs | req/s | p50 µs | p99 µs | errors | non-2xx | CPU-µs/req | syscalls/req | peak RSS MiB |\n")
	b.WriteString("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range g.cells {
		if c.Mode == "pipeline16" || !isMain(c) {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %d | %s | %s | %s | %d | %d | %s | %s | %s |\n",
			sizeLabel(c.Size), modeLabel(c.Mode), c.Conns, c.server().Label(), c.Runs,
			fmtNum(c.RPS, "%.0f"), fmtNum(c.P50, "%.0f"), fmtNum(c.P99, "%.0f"), c.Errors, c.Non2xx,
			fmtNum(c.CPU, "%.1f"), perReq(c), fmtNum(c.PeakRSS/1024, "%.1f"))
	}

	var sweep, pipe []cell
	base := sweepKey(g)
	swept := backendsWithSweep(g, base)
	for _, c := range g.cells {
		switch {
		case c.Mode == "pipeline16":
			pipe = append(pipe, c)
		case c.Mode == base.Mode && c.Size == base.Size && c.Conns == base.Conns && slices.Contains(swept, c.Backend):
			sweep = append(sweep, c)
		}
	}
	if len(sweep) > 0 {
		fmt.Fprintf(&b, "\n## Loops sweep (c=%d, %s, %s)\n\n", base.Conns, modeLabel(base.Mode), sizeLabel(base.Size))
		writeShortTable(&b, sweep)
	}
	if len(pipe) > 0 {
		b.WriteString("\n## Pipelined, 16 requests per write (wrk's latency is per batch)\n\n")
		writeShortTable(&b, pipe)
	}
	return b.Bytes()
}

// sweepKey is the cell the loops sweep runs: keep-alive, the first size
// and connection count.
func sweepKey(g *grid) key {
	k := key{Mode: "keepalive"}
	if s := g.sizes(); len(s) > 0 {
		k.Size = s[0]
	}
	if c := g.conns(); len(c) > 0 {
		k.Conns = c[0]
	}
	return k
}

func writeShortTable(b *bytes.Buffer, cells []cell) {
	cells = append([]cell(nil), cells...)
	sortByServer(cells)
	b.WriteString("| server | conns | runs | req/s | p50 µs | p99 µs | errors | non-2xx | CPU-µs/req | syscalls/req |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cells {
		fmt.Fprintf(b, "| %s | %d | %d | %s | %s | %s | %d | %d | %s | %s |\n",
			c.server().Label(), c.Conns, c.Runs, fmtNum(c.RPS, "%.0f"), fmtNum(c.P50, "%.0f"),
			fmtNum(c.P99, "%.0f"), c.Errors, c.Non2xx, fmtNum(c.CPU, "%.1f"), perReq(c))
	}
}

func sortByServer(cells []cell) {
	slices.SortStableFunc(cells, func(a, b cell) int { return cmpServer(a.server(), b.server()) })
}

// latestBlock is what results/README.md shows of the newest run: where it
// ran, the headline table (the first connection count and size, every
// mode), and the plots, with links relative to the README (rel).
func latestBlock(g *grid, run, rel, env string, plots []string) string {
	var b strings.Builder
	b.WriteString(latestBegin + "\n")
	fmt.Fprintf(&b, "## Latest run: [%s](%s/summary.md)\n\n", run, rel)
	for _, line := range strings.Split(env, "\n") {
		k, _, _ := strings.Cut(line, ":")
		switch k {
		case "date", "quick", "cpu", "cores", "kernel", "go", "load average at start (1, 5, 15 min)", "uring":
			fmt.Fprintf(&b, "- %s\n", line)
		}
	}
	base := sweepKey(g)
	fmt.Fprintf(&b, "\nMedians at c=%d, %s; all cells in [summary.md](%s/summary.md).\n\n", base.Conns, sizeLabel(base.Size), rel)
	b.WriteString("| server | mode | req/s | p99 µs | CPU-µs/req | syscalls/req |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|\n")
	for _, mode := range g.modes(true) {
		for _, s := range g.mainServers() {
			c, ok := g.at[key{s.Backend, s.Loops, base.Conns, mode, base.Size}]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", s.Label(), modeLabel(mode),
				fmtNum(c.RPS, "%.0f"), fmtNum(c.P99, "%.0f"), fmtNum(c.CPU, "%.1f"), perReq(c))
		}
	}
	b.WriteString("\n")
	for _, p := range plots {
		fmt.Fprintf(&b, "![%s](%s/%s)\n\n", strings.TrimSuffix(p, ".png"), rel, p)
	}
	b.WriteString(latestEnd + "\n")
	return b.String()
}

// updateReadme replaces the latest block of the README at path, or
// appends one if it has none.
func updateReadme(path, block string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	i := strings.Index(s, latestBegin)
	j := strings.Index(s, latestEnd)
	switch {
	case i >= 0 && j > i:
		s = s[:i] + block + strings.TrimPrefix(s[j+len(latestEnd):], "\n")
	case i >= 0 || j >= 0:
		return fmt.Errorf("%s: one latest marker without the other; fix by hand", path)
	default:
		if s != "" && !strings.HasSuffix(s, "\n\n") {
			s = strings.TrimRight(s, "\n") + "\n\n"
		}
		s += block
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// relDir is dir relative to the README's folder, with forward slashes.
func relDir(readme, dir string) (string, error) {
	rel, err := filepath.Rel(filepath.Dir(readme), dir)
	return filepath.ToSlash(rel), err
}
