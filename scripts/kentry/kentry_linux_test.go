package main

import (
	"errors"
	"testing"
)

// The benchmarks make kentry's rows (doc in main.go). Each pins its
// thread to one CPU, sets up outside the timed loop, and fails on the
// first call that does not do what it should; what the kernel or the
// sandbox refuses (io_uring) is skipped with the reason.

func setup(b *testing.B) {
	b.Helper()
	unpin, err := pin()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(unpin)
	b.ReportAllocs()
}

func BenchmarkGetppidSyscall(b *testing.B) {
	setup(b)
	for b.Loop() {
		getppidSyscall()
	}
}

func BenchmarkGetppidRaw(b *testing.B) {
	setup(b)
	for b.Loop() {
		getppidRaw()
	}
}

func BenchmarkEpollWaitIdle(b *testing.B) {
	setup(b)
	e, err := newIdleEpoll()
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	for b.Loop() {
		if n, err := e.wait(); err != nil || n != 0 {
			b.Fatalf("epoll_wait: %d events, %v; want 0", n, err)
		}
	}
}

func newRingOrSkip(b *testing.B) *ring {
	b.Helper()
	g, err := newRing()
	if errors.Is(err, errNoRing) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func BenchmarkUringEnterEmpty(b *testing.B) {
	setup(b)
	g := newRingOrSkip(b)
	defer g.Close()
	for b.Loop() {
		if _, err := g.enterEmpty(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUringNop(b *testing.B) {
	setup(b)
	g := newRingOrSkip(b)
	defer g.Close()
	var i uint64
	for b.Loop() {
		i++
		if data, res, err := g.nop(i); err != nil || data != i || res != 0 {
			b.Fatalf("NOP %d: CQE user_data %d, res %d, %v", i, data, res, err)
		}
	}
}

func benchWriteRead(b *testing.B, newPair func() (pair, error), n int) {
	setup(b)
	p, err := newPair()
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	w, r := make([]byte, n), make([]byte, n)
	for b.Loop() {
		if _, err := p.writeRead(w, r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteRead1BUnix(b *testing.B) { benchWriteRead(b, unixPair, 1) }

func BenchmarkWriteRead1BTCP(b *testing.B) { benchWriteRead(b, tcpPair, 1) }

// BenchmarkWriteRead1500TCP is the write(2) beside sendfile's row: the
// same 1,500 bytes from memory, drained the same way.
func BenchmarkWriteRead1500TCP(b *testing.B) { benchWriteRead(b, tcpPair, size) }

func BenchmarkSendfileRead1500TCP(b *testing.B) {
	setup(b)
	p, err := tcpPair()
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	f, err := pageFile(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	in, r := int(f.Fd()), make([]byte, size)
	for b.Loop() {
		if _, err := p.sendfileRead(in, r); err != nil {
			b.Fatal(err)
		}
	}
}

// readBatch is how many segments BenchmarkRead1500TCP writes with the
// timer stopped before it reads them with the timer running: stopping and
// starting the timer costs a runtime.ReadMemStats each, which a batch
// spreads over its reads' wall time (not over their timed time).
const readBatch = 64

// BenchmarkRead1500TCP is the read(2) of 1,500 bytes alone, the draining
// half of the two rows above: each of them less it is its sending call.
func BenchmarkRead1500TCP(b *testing.B) {
	setup(b)
	p, err := tcpPair()
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if err := p.deep(readBatch); err != nil {
		b.Fatal(err)
	}
	w, r := make([]byte, size), make([]byte, size)
	b.ResetTimer()
	for i := 0; i < b.N; {
		k := min(readBatch, b.N-i)
		b.StopTimer()
		for range k {
			if n, e := write(p.a, w); e != 0 || n != size {
				b.Fatalf("write: %d of %d bytes: %v", n, size, e)
			}
		}
		b.StartTimer()
		for range k {
			if _, err := p.drain(r); err != nil {
				b.Fatal(err)
			}
		}
		i += k
	}
}
