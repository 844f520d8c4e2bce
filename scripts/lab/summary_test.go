package lab

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchfmt"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata (labrun, kentry)")

func TestClusters(t *testing.T) {
	// The issue's: io_uring's five rounds, Connection: close, a loaded machine.
	lo, hi, ok := Clusters([]float64{86.8, 63.7, 90.0, 64.2, 90.7})
	require.True(t, ok)
	assert.Equal(t, []float64{63.7, 64.2}, lo)
	assert.Equal(t, []float64{86.8, 90.0, 90.7}, hi)

	for name, xs := range map[string][]float64{
		"spread":    {21.0, 22.5, 23.1, 24.0, 25.2, 26.0, 27.1},
		"outlier":   {21.0, 21.1, 21.2, 21.3, 21.4, 21.5, 30.0}, // one value is not a side
		"too few":   {10, 10, 20, 20},
		"tiny gaps": {100.0, 100.1, 100.2, 101.0, 101.1, 101.2}, // under 5% of the median
	} {
		_, _, ok := Clusters(xs)
		assert.False(t, ok, name)
	}
}

// Ratios are paired by round: a drift shared by both steps of a round
// cancels, so io_uring's 0.8x has a narrow interval that excludes 1,
// and the A/A pair's includes it.
func TestCompare(t *testing.T) {
	drift := []float64{1.0, 1.3, 0.9, 1.2, 1.1, 0.95, 1.25, 1.05}
	row := func(round int, v float64) []string {
		r := make([]string, len(Rounds))
		r[col("round")] = itoa(round)
		r[col("machine_cpu_us_per_req")] = ftoa(v)
		return r
	}
	var et, uring, aa [][]string
	for i, d := range drift {
		j := 1 + 0.01*float64(i%3-1)
		et = append(et, row(i+1, 28*d))
		uring = append(uring, row(i+1, 22.4*d*j))
		aa = append(aa, row(i+1, 28*d/j))
	}
	r, ok := Compare(uring, et, "machine_cpu_us_per_req")
	require.True(t, ok)
	assert.Equal(t, 8, r.N)
	assert.InDelta(t, 0.8, r.Summary.Center, 0.01)
	assert.True(t, r.Finite())
	assert.False(t, r.Level())
	assert.Less(t, r.Summary.Hi, 0.82)
	r, _ = Compare(aa, et, "machine_cpu_us_per_req")
	assert.True(t, r.Level())
	// Only rounds both ran are paired.
	r, _ = Compare(uring[:5], et, "machine_cpu_us_per_req")
	assert.Equal(t, 5, r.N)
	assert.False(t, r.Finite(), "5 rounds give no 95% interval")
	_, ok = Compare(nil, et, "machine_cpu_us_per_req")
	assert.False(t, ok)
}

// summary.md on a fixed run (testdata/labrun: made-up rows, not a
// measurement) is what it was, and Summarize rewrites it from rounds.csv
// and env.txt alone, byte for byte.
func TestSummary(t *testing.T) {
	dir := filepath.Join("testdata", "labrun")
	r, err := ReadRun(dir)
	require.NoError(t, err)
	var bench bytes.Buffer
	require.NoError(t, r.WriteBench(&bench))
	if *update {
		require.NoError(t, Summarize(dir))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "bench.txt"), bench.Bytes(), 0o644))
	}
	md := string(r.Summary())
	want, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
	assert.Equal(t, string(want), md, "run go test ./scripts/lab -update after a deliberate change")
	assert.Contains(t, md, "| uring ÷ et | 8 | 0.808 [0.769, 0.816] | 0.005 | A lower by 19.2% |")
	assert.Contains(t, md, "| et-aa ÷ et | 8 |")
	assert.Contains(t, md, "**level**")
	assert.Contains(t, md, "| gnet | 50 | 6 | 0 | two behaviours: 40.00 (3) and 55.")
	assert.Contains(t, md, "**Two behaviours** in gnet machine CPU-µs/req")

	tmp := filepath.Join(t.TempDir(), "labrun")
	require.NoError(t, os.Mkdir(tmp, 0o755))
	for _, f := range []string{"rounds.csv", "env.txt"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(tmp, f), b, 0o644))
	}
	require.NoError(t, Summarize(tmp))
	got, err := os.ReadFile(filepath.Join(tmp, "summary.md"))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}

// bench.txt is Go's benchmark format: benchfmt (benchstat's reader)
// reads one result per measured row, with the lab's units.
func TestWriteBench(t *testing.T) {
	r, err := ReadRun(filepath.Join("testdata", "labrun"))
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, r.WriteBench(&b))
	rd := benchfmt.NewReader(&b, "bench.txt")
	n := 0
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.Result:
			if n == 0 {
				assert.Equal(t, "Fixture/step=et/conns=50", string(rec.Name))
				v, ok := rec.Value("machine-us/req")
				assert.True(t, ok)
				assert.InDelta(t, 28.0, v, 0.01)
				_, ok = rec.Value("req/s")
				assert.True(t, ok)
				assert.Equal(t, "linux", rec.GetConfig("goos"))
			}
			n++
		case *benchfmt.SyntaxError:
			t.Fatalf("bench.txt: %v", rec)
		}
	}
	require.NoError(t, rd.Err())
	assert.Equal(t, len(r.Rows), n)
}

func itoa(i int) string     { return ftoa(float64(i)) }
func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// A run with cold cells gets a section of their own figures; one without
// (every committed folder before them) gets none, so make study's
// summaries stay as they were.
func TestSummaryExtras(t *testing.T) {
	row := func(step, round, mbps string) []string {
		r, err := Row(Rounds, nil, []string{"step=" + step, "label=x", "conns=16", "round=" + round, "rps=100", "cold_MBps=" + mbps})
		require.NoError(t, err)
		return r
	}
	run := Run{Name: "cold", Env: "cells: a\n", Rows: [][]string{row("a", "1", "40"), row("a", "2", "42")}}
	assert.Contains(t, string(run.Summary()), "## Cold sets")
	assert.Contains(t, string(run.Summary()), "| a | 2 | 41.0 (n < 6) |")
	run.Rows = [][]string{row("a", "1", ""), row("a", "2", "")}
	assert.NotContains(t, string(run.Summary()), "## Cold sets")
	assert.NotContains(t, string(run.Summary()), "## CGI beside")
}

// A rate:N cell's percentiles get intervals across its rounds, and a
// round counts as saturated when it fell under 95% of the offered rate
// or left over 1% of it unsent.
func TestRateCells(t *testing.T) {
	var rows [][]string
	for i := range 6 {
		r := make([]string, len(Rounds))
		r[col("step")], r[col("kind")], r[col("round")] = "et-r1000", "epoll", itoa(i+1)
		r[col("rate_offered")], r[col("duration_s")] = "1000", "30"
		r[col("rps")], r[col("unsent")] = "1000", "0"
		if i == 5 {
			r[col("rps")] = "940" // under 95%
		}
		if i == 4 {
			r[col("unsent")] = "301" // over 1% of 30 s at 1000 req/s
		}
		r[col("p50_us")], r[col("p99_us")], r[col("p999_us")] = ftoa(100+float64(i)), ftoa(900+float64(i)), ftoa(2000+float64(i))
		rows = append(rows, r)
	}
	for i := range 6 { // uring-r1000: p99 0.8 of epoll's in every round
		r := slices.Clone(rows[i])
		r[col("step")], r[col("kind")] = "uring-r1000", "uring"
		r[col("p99_us")] = ftoa(0.8 * (900 + float64(i)))
		rows = append(rows, r)
	}
	run := Run{Name: "fixed-rate", Rows: append(rows, make([]string, len(Rounds))), Env: "cells: et-r1000 uring-r1000\ncompare: uring-r1000 et-r1000\n"}
	run.Rows[12][col("step")], run.Rows[12][col("round")] = "et", "1" // not a rate cell
	cells := run.RateCells()
	require.Len(t, cells, 2)
	c := cells[0]
	assert.Equal(t, 1000, c.Rate)
	assert.Equal(t, 6, c.N)
	assert.Equal(t, 2, c.Saturated)
	assert.Equal(t, int64(301), c.Unsent)
	assert.InDelta(t, 902.5, c.P99.Center, 1e-9)
	assert.Equal(t, 900.0, c.P99.Lo, "six rounds: the extremes bound the interval")
	assert.Equal(t, 905.0, c.P99.Hi)
	s := string(run.Summary())
	assert.Contains(t, s, "## Fixed rate")
	assert.Contains(t, s, "| et-r1000 | 1000 | 6 | 1000 [940, 1000] | 102 [100, 105] | 902 [900, 905] | 2002 [2000, 2005] |")
	assert.Contains(t, s, "| uring-r1000 ÷ et-r1000 | 6 | 1.000 [1.000, 1.000] | 0.800 [0.800, 0.800] | 1.000 [1.000, 1.000] |")
}
