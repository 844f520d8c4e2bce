package main

import (
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twinloop/twinloop/scripts/lab"
)

// copyTestdata makes a run folder in t.TempDir() from testdata/.
func copyTestdata(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "2025-01-31_0000000_quick")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	copyFiles(t, "testdata", dir, "summary.csv", "env.txt")
	return dir
}

// copyFiles copies the named files from src to dst.
func copyFiles(t *testing.T, src, dst string, names ...string) {
	t.Helper()
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(src, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, name), b, 0o644))
	}
}

// runOnTestdata runs a mode on a copy of the named files of
// testdata/sub and returns the folder and the summary.md it wrote.
func runOnTestdata(t *testing.T, sub string, run func(dir string) error, files ...string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	copyFiles(t, filepath.Join("testdata", sub), dir, files...)
	require.NoError(t, run(dir))
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
	return dir, string(md)
}

func TestRunWritesPlotsAndSummary(t *testing.T) {
	dir := copyTestdata(t)
	readme := filepath.Join(filepath.Dir(dir), "README.md")
	require.NoError(t, os.WriteFile(readme, []byte("# Results\n\nHow to read them.\n"), 0o644))

	require.NoError(t, run(dir, readme))

	for _, name := range []string{"rps_vs_conns.png", "syscalls_per_req.png", "cpu_us_per_req.png", "loops_scaling.png"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, name)
		require.Greater(t, len(b), 1000, name)
		assert.Equal(t, "\x89PNG", string(b[:4]), name)
	}

	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
	s := string(md)
	// epoll/1 keep-alive: medians of 100000 and 110000, of 1.05 and 1.04.
	// testdata's summary.csv predates peak_rss_kb: the column reads as a dash.
	assert.Contains(t, s, "| 1500 B | keep-alive | 50 | epoll/1 | 2 | 105000 | 445 | 890 | 0 | 0 | 9.3 | 1.04 (counters) | – |")
	// errors are summed, a missing syscall figure shows as a dash.
	assert.Contains(t, s, "| 1500 B | Connection: close | 50 | epoll/1 | 2 | 30500 |")
	assert.Contains(t, s, "| 1500 B | Connection: close | 50 | nginx/2 | 1 | 24000 | 1950 | 3600 | 0 | 0 | 39.0 | – |")
	assert.Contains(t, s, "## Loops sweep (c=50, keep-alive, 1500 B)")
	assert.Contains(t, s, "| epoll/3 | 50 | 1 | 90000 |")
	sweep := s[strings.Index(s, "## Loops sweep"):strings.Index(s, "## Pipelined")]
	assert.NotContains(t, sweep, "gohttp", "gohttp has one loop count: not in the sweep table")
	assert.Contains(t, s, "## Pipelined")
	assert.Contains(t, s, "cpu: Test CPU")
	assert.NotContains(t, s, "syscalls.md", "no syscalls.md in the folder, so no link")

	// The README keeps its text and gets one latest block; running again
	// replaces the block instead of adding a second.
	require.NoError(t, run(dir, readme))
	rb, err := os.ReadFile(readme)
	require.NoError(t, err)
	r := string(rb)
	assert.True(t, strings.HasPrefix(r, "# Results\n\nHow to read them.\n\n"+latestBegin), r)
	assert.Equal(t, 1, strings.Count(r, latestBegin))
	assert.Contains(t, r, "## Latest run: [2025-01-31_0000000_quick](2025-01-31_0000000_quick/summary.md)")
	assert.Contains(t, r, "![rps_vs_conns](2025-01-31_0000000_quick/rps_vs_conns.png)")
	assert.Contains(t, r, "| gohttp | Connection: close | 12000 | 8000 | 80.0 | 30.10 (perf) |")
	assert.Contains(t, r, "- load average at start (1, 5, 15 min): 0.10 0.20 0.30")
	assert.True(t, strings.HasSuffix(r, latestEnd+"\n"))
}

func TestReadRowsRejectsOtherHeader(t *testing.T) {
	_, err := readRows(strings.NewReader("backend,rps\nepoll,1\n"))
	require.Error(t, err)
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{in: []float64{3, 1, 2}, want: 2},
		{in: []float64{4, 1, 3, 2}, want: 2.5},
		{in: []float64{math.NaN(), 5}, want: 5},
	} {
		assert.Equal(t, tc.want, median(tc.in), "%v", tc.in)
	}
	assert.True(t, math.IsNaN(median([]float64{math.NaN()})))
}

func TestGrid(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "summary.csv"))
	require.NoError(t, err)
	defer f.Close()
	rows, err := readRows(f)
	require.NoError(t, err)
	g := newGrid(rows)

	assert.Equal(t, []server{{"epoll", 1}, {"nginx", 1}, {"nginx", 2}, {"gohttp", 1}}, g.mainServers(),
		"main servers are those measured with Connection: close")
	assert.Equal(t, []string{"epoll", "nginx"}, backendsWithSweep(g, sweepKey(g)))
	assert.Equal(t, []string{"keepalive", "close", "pipeline16"}, g.modes(true))
	assert.Equal(t, []string{"keepalive", "close"}, g.modes(false))
}

// The ladder mode reads make ladder's CSVs (testdata/ladder) and writes
// summary.md with medians, the gnet ratios and the attribution table,
// and both plots.
func TestRunLadder(t *testing.T) {
	dir, s := runOnTestdata(t, "ladder", runLadder, "summary.csv", "attribution.csv", "env.txt")
	assert.Contains(t, s, "| blocking | blocking, one connection at a time (Connection: close) | 9100 | 925 | 60.00 |")
	assert.Contains(t, s, "| uring | + multishot accept/recv (io_uring default) | 82500 | 810 | 10.90 | 0.060 | 0.080 | 0.120 | 0.040 |")
	assert.Contains(t, s, "| nginx | nginx, 1 worker | 45500 | 1450 | 21.50 | 0.010 | – | 5.030 | – |")
	assert.Contains(t, s, "| uring | 0.96 | 1.03 |", "ratios to gnet: 82500/85500, 10.9/10.6")
	assert.Contains(t, s, "| non-2xx | machine CPU-µs/req | machine, min-max | softirq CPU-µs/req | wrk CPU-µs/req |")
	assert.Contains(t, s, "| 0 | 0 | – | – | – | – |", "a summary.csv from before the whole-machine columns: dashes")
	assert.NotContains(t, s, "A/A pairs", "no whole-machine column, no pairs section")
	assert.Contains(t, s, "| et | 11.40 | 5.70 (50%) |")
	for _, png := range []string{"ladder.png", "attribution.png"} {
		fi, err := os.Stat(filepath.Join(dir, png))
		require.NoError(t, err)
		assert.Greater(t, fi.Size(), int64(1000))
	}
}

// The ladder's pairs section sets io_uring ÷ epoll against the A/A
// pairs: a ratio inside the larger A/A distance is level, one outside it
// is not; and the min-max column shows each step's spread.
func TestLadderPairs(t *testing.T) {
	steps := []step{
		{ID: "et", Machine: 17, MachineLo: 16.5, MachineHi: 18.25},
		{ID: "uring", Machine: 14.5},
		{ID: "et-aa", Machine: 17.85},     // +5%
		{ID: "uring-aa", Machine: 13.775}, // -5%
	}
	s := string(pairsMD(steps))
	assert.Contains(t, s, "| A/A: et-aa in a second slot ÷ et | 17.85 ÷ 17.00 | 1.05 |")
	assert.Contains(t, s, "| A/A: uring-aa in a second slot ÷ uring | 13.78 ÷ 14.50 | 0.95 |")
	assert.Contains(t, s, "| io_uring ÷ epoll | 14.50 ÷ 17.00 | 0.85 (outside the A/A spread of ±5%) |")
	steps[1].Machine, steps[3].Machine = 16.5, 15.675
	assert.Contains(t, string(pairsMD(steps)), "| 0.97 (level: inside the A/A spread of ±5%) |")
	assert.Contains(t, string(pairsMD(steps[:2])), "| 0.97 (no A/A pair in this run) |")
	other := []step{{ID: "sf-64k", Machine: 20, RSS: math.NaN()}, {ID: "sf-64k-aa", Machine: 21, RSS: math.NaN()}}
	assert.Contains(t, string(pairsMD(other)), "| A/A: sf-64k-aa in a second slot ÷ sf-64k | 21.00 ÷ 20.00 | 1.05 |", "any X-aa step pairs with X")
	assert.Nil(t, pairsMD(other[:1]), "no pair, no io_uring and epoll: no section")
	assert.Nil(t, memoryMD(other), "no RSS column: no section")
	mem := []step{{ID: "uring", Conns: 10000, RSS: 48476, CQEs: 1.25}, {ID: "nginx", Conns: 10000, RSS: 17584, CQEs: math.NaN()}}
	m := string(memoryMD(mem))
	assert.Contains(t, m, "| uring | 10000 | 48476 | 1.250 |")
	assert.Contains(t, m, "| nginx | 10000 | 17584 | – |")
	assert.Equal(t, "16.50-18.25", fmtRange(steps[0].MachineLo, steps[0].MachineHi))
}

// The cold mode reads make cold's cold.csv (testdata/cold): medians per
// (set, server) in the sets' and servers' order, errors summed, a round
// with no hot-page sample shown as a dash; and the plot, whose log axes
// take the empty and zero values.
func TestRunCold(t *testing.T) {
	dir, s := runOnTestdata(t, "cold", runCold, "cold.csv", "env.txt")
	assert.Contains(t, s, "| 128 files of 16 MiB | twinloop epoll | 2 | 3100.0 | 795.00 | 11 | 77.0 | 4.3 | 0.29 | 2900.0 | 1 | 0 | 0 |")
	assert.Contains(t, s, "|  | twinloop io_uring | 2 | 152.0 | 0.15 | 35000 | 74.5 | 4.1 | 6.05 | 13.0 | 0 | 2 | 0 |")
	assert.Contains(t, s, "| 20,000 files of 16 KiB | twinloop epoll | 1 |")
	assert.Contains(t, s, "|  | twinloop io_uring | 1 | – | – | 0 | 2.4 | 150.0 | 0.10 | – | 4 | 0 | 0 |")
	assert.Less(t, strings.Index(s, "16 MiB"), strings.Index(s, "16 KiB"))
	assert.Contains(t, s, "cpu: Test CPU")
	fi, err := os.Stat(filepath.Join(dir, "cold.png"))
	require.NoError(t, err)
	assert.Greater(t, fi.Size(), int64(1000))
}

// A summary.csv with peak_rss_kb gives the cell's median in MiB.
func TestPeakRSSColumn(t *testing.T) {
	in := "backend,loops,conns,mode,size,run,rps,p50_us,p99_us,errors,non2xx,cpu_us_per_req,syscalls_per_req,syscall_method,peak_rss_kb\n" +
		"epoll,1,10000,keepalive,64k,1,50000,1000,9000,0,0,20.0,1.5,counters,204800\n" +
		"epoll,1,10000,keepalive,64k,2,52000,1000,9000,0,0,20.0,1.5,counters,206848\n"
	rows, err := readRows(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, 204800.0, rows[0].PeakRSS)
	md := string(summaryMD(newGrid(rows), "run", "", nil, false))
	assert.Contains(t, md, "| 64 KiB | keep-alive | 10000 | epoll/1 | 2 | 51000 | 1000 | 9000 | 0 | 0 | 20.0 | 1.50 (counters) | 201.0 |")
}

// The fixed-rate mode reads make fixed-rate's summary.csv
// (testdata/fixedrate: epoll and nginx at three rates, epoll's first in
// two rounds, nginx saturated at the last): a row per server and rate in
// the servers' order and by rate as a number, medians over the rounds,
// errors and non-2xx summed, an empty column as a dash; and the plot.
func TestRunFixedRate(t *testing.T) {
	dir, s := runOnTestdata(t, "fixedrate", runFixedRate, "summary.csv", "env.txt")
	rows := []string{
		"| twinloop epoll | 10000 | 2 | 10000 | 0.042 | 0.130 | 0.310 | 8.50 | 20.50 | 4.10 | 6.10 | 1 | no |",
		"|  | 40000 | 1 | 40001 | 0.050 | 0.150 | 0.400 | 7.50 | 18.00 | 4.50 | 5.80 | 0 | no |",
		"|  | 100000 | 1 | 99990 | 0.060 | 0.300 | 1.200 | 7.00 | 17.00 | 5.00 | – | 0 | no |",
		"| nginx, 1 worker | 10000 | 1 | 10000 | 0.060 | 0.200 | 0.500 | 12.00 | 26.00 | 5.00 | 6.50 | 0 | no |",
		"|  | 40000 | 1 | 39998 | 0.070 | 0.260 | 0.700 | 11.00 | 24.00 | 5.50 | 6.00 | 0 | no |",
		"|  | 100000 | 1 | 61000 | 250.000 | 900.000 | 950.000 | 31.00 | 60.00 | 9.00 | 4.00 | 2 | yes |",
	}
	var got []string
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| server |") {
			got = append(got, line)
		}
	}
	assert.Equal(t, rows, got)
	assert.Contains(t, s, "cpu: Test CPU")
	assert.Contains(t, s, "![fixed-rate](fixed-rate.png)")
	b, err := os.ReadFile(filepath.Join(dir, "fixed-rate.png"))
	require.NoError(t, err)
	require.Greater(t, len(b), 1000)
	assert.Equal(t, "\x89PNG", string(b[:4]))
}

// logTicks labels 1, 2 and 5 × 10^k as exact decimals within the axis.
func TestLogTicks(t *testing.T) {
	var labels []string
	for _, tk := range (logTicks{}).Ticks(0.03, 0.6) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	assert.Equal(t, []string{"0.05", "0.1", "0.2", "0.5"}, labels)
}

// The body-size mode reads sizes.txt (testdata/bodysizes: 4 KiB with the
// whole-machine columns and two rounds, 1 MiB from an ab-c50.sh before
// them): sizes in numeric order, medians and min-max, file ÷ memory, the
// CPU per GiB sent; a missing column is a dash.
func TestRunBodySizes(t *testing.T) {
	dir, s := runOnTestdata(t, "bodysizes", runBodySizes, "sizes.txt", "env.txt")
	assert.Contains(t, s, "| 4 KiB | epoll | 102,001 | 19.00 (18.00-20.00) | 8.50 | 89,000 | 21.50 (21.00-22.00) | 10.50 | 1.13 |")
	assert.Contains(t, s, "| 4 KiB | io_uring | 111,000 | 16.50 (16.00-17.00) | 8.00 | 101,000 | 18.50 (18.00-19.00) | 9.00 | 1.12 |")
	assert.Contains(t, s, "| 1 MiB | epoll | 2,000 | – | 400.00 | 3,000 | – | 200.00 | – |")
	// 19 µs per 4 KiB response: 19e-6 s × 262144 responses per GiB.
	assert.Contains(t, s, "| 4 KiB | epoll, memory | 2 | 4.98 (4.72-5.24) | 2.28 | 5.00 | 9.50 |")
	assert.Contains(t, s, "| 1 MiB | epoll, file | 1 | – | 4.20 | – | – |")
	assert.Less(t, strings.Index(s, "| 4 KiB |"), strings.Index(s, "| 1 MiB |"))
	assert.Contains(t, s, "cpu: Test CPU")
	b, err := os.ReadFile(filepath.Join(dir, "body-sizes.png"))
	require.NoError(t, err)
	assert.Equal(t, "\x89PNG", string(b[:4]))

	_, err = readBodySizes(strings.NewReader("binary\tbackend\n"))
	assert.Error(t, err, "a table before the first size line")
	_, err = readBodySizes(strings.NewReader("== 4x\n"))
	assert.Error(t, err, "a size without k or m")
}

// The c10k mode reads c10k-mem.sh's output (testdata/c10k: one binary
// and nginx, keep-alive in two runs, close in one): modes in order,
// servers as they ran, medians, errors summed, and the whole machine
// against epoll's.
func TestRunC10k(t *testing.T) {
	dir, s := runOnTestdata(t, "c10k", runC10k, "c10k.tsv")
	var got []string
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| mode |") {
			got = append(got, line)
		}
	}
	assert.Equal(t, []string{
		"| keep-alive | epoll | 2 | 59,000 | 14.50 | 33.00 | 9.25 | 17.25 | 43,500 | 0 | 1.00 |",
		"|  | io_uring | 2 | 63,000 | 12.25 | 28.50 | 7.25 | 15.50 | 48,500 | 3 | 0.86 |",
		"|  | nginx, 1 worker | 2 | 50,500 | 18.50 | 39.00 | 10.00 | 19.00 | 17,250 | 0 | 1.18 |",
		"| Connection: close | epoll | 1 | 14,000 | 28.00 | 100.00 | 29.00 | 70.00 | 16,000 | 0 | 1.00 |",
		"|  | nginx, 1 worker | 1 | 13,000 | 40.00 | 120.00 | 31.00 | 75.00 | 17,600 | 0 | 1.20 |",
	}, got)
	fi, err := os.Stat(filepath.Join(dir, "c10k.png"))
	require.NoError(t, err)
	assert.Greater(t, fi.Size(), int64(1000))

	two := []c10kCell{{Server: "old", Backend: "epoll"}, {Server: "new", Backend: "uring"}, {Server: "nginx", Backend: "nginx"}}
	assert.Equal(t, "new io_uring", c10kLabel(two, two[1]), "two binaries: named by their slot")
	assert.Equal(t, "nginx, 1 worker", c10kLabel(two, two[2]))
}

func TestThousands(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999.4: "999", 999.5: "1,000", 1234567: "1,234,567", -4321: "-4,321"} {
		assert.Equal(t, want, thousands(in), "%v", in)
	}
	assert.Equal(t, "–", thousands(math.NaN()))
}

// -labrun rewrites a scripts/labrun folder's summary.md with the
// driver's code (the same bytes) and draws its intervals.
func TestRunLabrun(t *testing.T) {
	src := filepath.Join("..", "lab", "testdata", "labrun")
	dir := filepath.Join(t.TempDir(), "labrun") // summary.md names its folder
	require.NoError(t, os.Mkdir(dir, 0o755))
	copyFiles(t, src, dir, "rounds.csv", "env.txt")
	require.NoError(t, runLabrun(dir))
	want, err := os.ReadFile(filepath.Join(src, "summary.md"))
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
	fi, err := os.Stat(filepath.Join(dir, "intervals.png"))
	require.NoError(t, err)
	assert.Greater(t, fi.Size(), int64(1000))
}

// A labrun folder with rate:N cells also gets fixed-rate.png, a line
// per server (the step id without its -r<rate>) with the percentiles'
// intervals, in ms.
func TestRunLabrunFixedRate(t *testing.T) {
	var rows [][]string
	for round := 1; round <= 6; round++ {
		for _, c := range []struct {
			id, kind string
			rate     int
		}{{"et-r1000", "epoll", 1000}, {"uring-r1000", "uring", 1000}, {"et-r60000", "epoll", 60000}, {"uring-r60000", "uring", 60000}} {
			rows = append(rows, []string{"step=" + c.id, "kind=" + c.kind, "label=" + c.id, "conns=50",
				"mode=rate:" + strconv.Itoa(c.rate), "size=1500", "round=" + strconv.Itoa(round), "requests=1000",
				"rps=" + strconv.Itoa(c.rate), "p50_us=" + strconv.Itoa(100+round), "p99_us=" + strconv.Itoa(1000+round),
				"p999_us=" + strconv.Itoa(3000+round), "machine_cpu_us_per_req=20", "cpu_us_per_req=10",
				"rate_offered=" + strconv.Itoa(c.rate), "unsent=0", "duration_s=30"})
		}
	}
	dir := labrunDir(t, "fixed-rate", "scripts/steps/fixed-rate.steps", rows)
	require.NoError(t, runLabrun(dir))
	fi, err := os.Stat(filepath.Join(dir, "fixed-rate.png"))
	require.NoError(t, err)
	assert.Greater(t, fi.Size(), int64(1000))
	r, err := lab.ReadRun(dir)
	require.NoError(t, err)
	cells := fromLabrun(r)
	require.Len(t, cells, 4)
	assert.Equal(t, "et", cells[0].Server)
	assert.Equal(t, "twinloop epoll", cells[0].Label)
	assert.InDelta(t, 1.0035, cells[0].P99, 1e-9)
	assert.Equal(t, [2]float64{1.001, 1.006}, cells[0].P99I)
	assert.False(t, cells[0].Saturated)
}

// A labrun folder whose servers ran at several connection counts also
// gets by-conns.png: a line per kind, mode and size, without the A/A
// twins, and without a kind that has two variants at one count.
func TestRunLabrunByConns(t *testing.T) {
	var rows [][]string
	for round := 1; round <= 6; round++ {
		for _, c := range []struct {
			id, kind, label string
			conns           int
		}{
			{"poll", "poll", "poll", 50}, {"et", "epoll", "epoll", 50}, {"et-aa", "epoll", "A/A: epoll again", 50},
			{"poll-c1k", "poll", "poll", 1000}, {"et-c1k", "epoll", "epoll", 1000}, {"et-aa-c1k", "epoll", "A/A: epoll again", 1000},
			{"uring", "uring", "uring", 50}, {"uring-sq", "uring", "uring, sqpoll", 50}, {"uring-c1k", "uring", "uring", 1000},
		} {
			rows = append(rows, []string{"step=" + c.id, "kind=" + c.kind, "label=" + c.label,
				"conns=" + strconv.Itoa(c.conns), "mode=keepalive", "size=1500", "round=" + strconv.Itoa(round),
				"requests=1000", "rps=1000", "machine_cpu_us_per_req=" + strconv.Itoa(20+c.conns/100+round),
				"cpu_us_per_req=10", "duration_s=5"})
		}
	}
	dir := labrunDir(t, "poll", "scripts/steps/poll.steps", rows)
	r, err := lab.ReadRun(dir)
	require.NoError(t, err)
	ss := connsSeries(r)
	require.Len(t, ss, 2)
	assert.Equal(t, "poll keepalive 1500", ss[0].name)
	assert.Equal(t, map[int]string{50: "et", 1000: "et-c1k"}, ss[1].steps)
	require.NoError(t, runLabrun(dir))
	fi, err := os.Stat(filepath.Join(dir, "by-conns.png"))
	require.NoError(t, err)
	assert.Greater(t, fi.Size(), int64(1000))
}

// labrunDir writes a labrun folder named name: rounds.csv from rows
// (each a list of column=value, lab.Row's), and an env.txt naming steps.
func labrunDir(t *testing.T, name, steps string, rows [][]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.Mkdir(dir, 0o755))
	var b strings.Builder
	w := csv.NewWriter(&b)
	w.Write(lab.Rounds)
	for _, kv := range rows {
		row, err := lab.Row(lab.Rounds, nil, kv)
		require.NoError(t, err)
		w.Write(row)
	}
	w.Flush()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rounds.csv"), []byte(b.String()), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "env.txt"), []byte("steps: "+steps+"\n"), 0o644))
	return dir
}
