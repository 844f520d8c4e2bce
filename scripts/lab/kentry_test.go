package lab

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// update (summary_test.go) rewrites testdata/kentry/summary.md too.

// TestKentrySummary checks summary.md written from a fixed bench.txt and
// env.txt (15 rounds; UringNop skipped) against testdata/summary.md, and
// the figures in it that can be told by hand.
func TestKentrySummary(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"bench.txt", "env.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", "kentry", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	require.NoError(t, WriteKentrySummary(dir))
	got, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.WriteFile(filepath.Join("testdata", "kentry", "summary.md"), got, 0o644))
	}
	want, err := os.ReadFile(filepath.Join("testdata", "kentry", "summary.md"))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "go test ./scripts/lab -run TestKentrySummary -update rewrites it")

	s := string(got)
	// GetppidRaw's 15 rounds are 100..114 ns: the median is 107, and
	// benchmath's 95% interval for 15 values is between order statistics
	// 4 and 12 (103 and 111).
	assert.Contains(t, s, "| GetppidRaw | 107.0 | 103.0 – 111.0 | 15 |")
	assert.Contains(t, s, "| UringNop | skipped | io_uring unavailable: io_uring_setup: operation not permitted (kernel.io_uring_disabled = 2) | 0 |")
	assert.Contains(t, s, "| GetppidSyscall − GetppidRaw |")
	assert.Contains(t, s, "- spec_rstack_overflow: Vulnerable: Safe RET, no microcode\n")
	assert.Contains(t, s, "- cpu microcode: 0xa101148\n")
	assert.Contains(t, s, "Run: 15 rounds,")
}

// TestKentrySummaryPairs checks that a difference pairs the k-th results of
// its two rows, not their sorted values.
func TestKentrySummaryPairs(t *testing.T) {
	var bench strings.Builder
	for i, v := range []float64{10, 30, 20, 50, 40, 60, 70} {
		// GetppidSyscall is GetppidRaw + i + 1 round by round.
		bench.WriteString("BenchmarkGetppidRaw-2 1000 " + ftoa(v) + " ns/op\n")
		bench.WriteString("BenchmarkGetppidSyscall-2 1000 " + ftoa(v+float64(i)+1) + " ns/op\n")
	}
	var b bytes.Buffer
	require.NoError(t, KentrySummary(&b, []byte(bench.String()), nil))
	// Differences 1..7: median 4; the 95% interval of 7 values is
	// their extremes.
	assert.Contains(t, b.String(), "| GetppidSyscall − GetppidRaw | 4.0 | 1.0 – 7.0 | 7 |")
	assert.Contains(t, b.String(), "No env.txt in this folder.")
}

func TestBusyWarning(t *testing.T) {
	for _, tc := range []struct {
		name, env, want string
	}{
		{name: "quiet", env: "cores: 2\nload average at start (1, 5, 15 min): 0.02 0.10 0.08\nload average at end (1, 5, 15 min): 0.91 0.40 0.16\n"},
		{name: "busy at start", env: "cores: 2\nload average at start (1, 5, 15 min): 16.15 15.09 8.00\nload average at end (1, 5, 15 min): 0.91 0.40 0.16\n",
			want: "load average 16.15 at the start on 2 cores"},
		{name: "no cores line", env: "load average at start (1, 5, 15 min): 16.15 15.09 8.00\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, busyWarning(envLines([]byte(tc.env))))
		})
	}
}

// IsKentry tells a make kentry bench.txt from other Go benchmark output.
func TestIsKentry(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	assert.NoError(t, IsKentry(filepath.Join("testdata", "kentry", "bench.txt")))
	assert.Error(t, IsKentry(write("core.txt", "pkg: github.com/twinloop/twinloop/core\nBenchmarkParse 100 10 ns/op\n")))
	assert.Error(t, IsKentry(write("empty.txt", "pkg: "+KentryPkg+"\n")), "no results")
	assert.Error(t, IsKentry(filepath.Join(dir, "missing.txt")))
}
