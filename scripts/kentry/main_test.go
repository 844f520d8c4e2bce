package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKeep checks what bench.txt keeps of a -test.v run's output.
func TestKeep(t *testing.T) {
	out := `goos: linux
goarch: amd64
pkg: github.com/twinloop/twinloop/scripts/kentry
cpu: AMD EPYC 9R14 96-Core Processor
BenchmarkUringNop
    kentry_linux_test.go:52: io_uring unavailable: io_uring_setup: operation not permitted
--- SKIP: BenchmarkUringNop
BenchmarkGetppidRaw
BenchmarkGetppidRaw 	 2398425	       100.2 ns/op	       0 B/op	       0 allocs/op
PASS
`
	seen := map[string]bool{}
	var b bytes.Buffer
	require.NoError(t, keep(&b, []byte(out), seen))
	require.NoError(t, keep(&b, []byte(out), seen)) // a second round
	assert.Equal(t, `goos: linux
goarch: amd64
pkg: github.com/twinloop/twinloop/scripts/kentry
cpu: AMD EPYC 9R14 96-Core Processor
--- SKIP: BenchmarkUringNop
    kentry_linux_test.go:52: io_uring unavailable: io_uring_setup: operation not permitted
BenchmarkGetppidRaw 	 2398425	       100.2 ns/op	       0 B/op	       0 allocs/op
BenchmarkGetppidRaw 	 2398425	       100.2 ns/op	       0 B/op	       0 allocs/op
`, b.String())
}
