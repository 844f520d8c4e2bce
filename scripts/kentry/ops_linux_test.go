package main

import (
	"errors"
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The operations, each made once and checked for what it did; and each
// benchmark run for one iteration. No test here looks at a time.

func pinned(t *testing.T) {
	t.Helper()
	unpin, err := pin()
	require.NoError(t, err)
	t.Cleanup(unpin)
}

func TestGetppid(t *testing.T) {
	pinned(t)
	assert.Equal(t, os.Getppid(), getppidSyscall())
	assert.Equal(t, os.Getppid(), getppidRaw())
}

func TestEpollWaitIdle(t *testing.T) {
	pinned(t)
	e, err := newIdleEpoll()
	require.NoError(t, err)
	defer e.Close()
	n, err := e.wait()
	require.NoError(t, err)
	assert.Equal(t, 0, n, "an idle socket has no event")

	// The socket is registered: a byte to it is an event.
	_, errno := write(e.conn.a, []byte{1})
	require.Zero(t, errno)
	n, err = e.wait()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, int32(e.conn.b), e.events[0].Fd)
}

func ringOrSkip(t *testing.T) *ring {
	t.Helper()
	g, err := newRing()
	if errors.Is(err, errNoRing) {
		t.Skip(err)
	}
	require.NoError(t, err)
	t.Cleanup(g.Close)
	return g
}

func TestUringEnterEmpty(t *testing.T) {
	pinned(t)
	g := ringOrSkip(t)
	n, err := g.enterEmpty()
	require.NoError(t, err)
	assert.Equal(t, 0, n, "no SQE submitted")
	assert.Zero(t, g.r.CQReady())
}

func TestUringNop(t *testing.T) {
	pinned(t)
	g := ringOrSkip(t)
	for i := uint64(1); i <= 20; i++ { // more than the ring's 8 entries: each SQE and CQE is given back
		data, res, err := g.nop(i)
		require.NoError(t, err)
		assert.Equal(t, i, data, "the NOP's CQE carries its user_data")
		assert.Zero(t, res)
	}
	assert.Zero(t, g.r.CQReady(), "each CQE reaped")
}

func TestWriteRead(t *testing.T) {
	pinned(t)
	for _, tc := range []struct {
		name    string
		newPair func() (pair, error)
		n       int
	}{
		{name: "1B unix", newPair: unixPair, n: 1},
		{name: "1B tcp", newPair: tcpPair, n: 1},
		{name: "1500B tcp", newPair: tcpPair, n: size},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.newPair()
			require.NoError(t, err)
			defer p.Close()
			w, r := make([]byte, tc.n), make([]byte, tc.n)
			for i := range w {
				w[i] = byte(i + 7)
			}
			n, err := p.writeRead(w, r)
			require.NoError(t, err)
			assert.Equal(t, tc.n, n)
			assert.Equal(t, w, r, "the bytes read are the bytes written")
		})
	}
}

func TestSendfileRead(t *testing.T) {
	pinned(t)
	p, err := tcpPair()
	require.NoError(t, err)
	defer p.Close()
	f, err := pageFile(t.TempDir())
	require.NoError(t, err)
	defer f.Close()
	want, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	require.Len(t, want, size)

	r := make([]byte, size)
	for range 2 { // each call sends the file from its start
		clear(r)
		n, err := p.sendfileRead(int(f.Fd()), r)
		require.NoError(t, err)
		assert.Equal(t, size, n)
		assert.Equal(t, want, r, "the bytes read are the file's")
	}
}

// TestBenchmarksOnce runs each benchmark for one iteration: that it sets
// up, makes its call and checks it without failing (testing.Benchmark
// reports a failed benchmark as zero iterations).
func TestBenchmarksOnce(t *testing.T) {
	bt := flag.Lookup("test.benchtime")
	require.NotNil(t, bt)
	old := bt.Value.String()
	require.NoError(t, bt.Value.Set("1x"))
	defer bt.Value.Set(old)

	_, ringErr := newRingOnce()
	for _, bm := range []struct {
		name  string
		f     func(*testing.B)
		uring bool
	}{
		{name: "GetppidSyscall", f: BenchmarkGetppidSyscall},
		{name: "GetppidRaw", f: BenchmarkGetppidRaw},
		{name: "EpollWaitIdle", f: BenchmarkEpollWaitIdle},
		{name: "UringEnterEmpty", f: BenchmarkUringEnterEmpty, uring: true},
		{name: "UringNop", f: BenchmarkUringNop, uring: true},
		{name: "WriteRead1BUnix", f: BenchmarkWriteRead1BUnix},
		{name: "WriteRead1BTCP", f: BenchmarkWriteRead1BTCP},
		{name: "WriteRead1500TCP", f: BenchmarkWriteRead1500TCP},
		{name: "SendfileRead1500TCP", f: BenchmarkSendfileRead1500TCP},
		{name: "Read1500TCP", f: BenchmarkRead1500TCP},
	} {
		r := testing.Benchmark(bm.f)
		if bm.uring && ringErr != nil {
			assert.Zero(t, r.N, "%s: skipped (%v)", bm.name, ringErr)
			continue
		}
		// Not its allocations: at one iteration they are whatever else
		// the process allocated meanwhile.
		assert.Equal(t, 1, r.N, "%s ran once", bm.name)
	}
}

// newRingOnce says whether this kernel gives a ring.
func newRingOnce() (bool, error) {
	g, err := newRing()
	if err != nil {
		return false, err
	}
	g.Close()
	return true, nil
}
