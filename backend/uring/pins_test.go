//go:build linux

package uring

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// A connection's pins are made once: covering the same out and iov
// arrays again allocates nothing; a grown out array is pinned in its
// place.
func TestHeldPinsPinOnce(t *testing.T) {
	cn := &conn{vec: sendVec{iov: make([]syscall.Iovec, 0, 4)}}
	out := make([]byte, 100, 512)
	cn.vec.pins.cover(cn, out[10:])
	allocs := testing.AllocsPerRun(100, func() { cn.vec.pins.cover(cn, out[20:50]) })
	assert.Zero(t, allocs, "allocations per send once pinned")
	assert.Equal(t, arrayEnd(out), cn.vec.pins.outEnd, "out's array is the one pinned")

	grown := append(out[:cap(out)], 1)
	cn.vec.pins.cover(cn, grown[5:])
	assert.Equal(t, arrayEnd(grown), cn.vec.pins.outEnd, "the grown array is pinned in the old one's place")
	cn.vec.pins.cover(cn, grown[:0:0])
	assert.Equal(t, arrayEnd(grown), cn.vec.pins.outEnd, "an empty Mem with no room leaves the pin as it is")

	cn.vec.iov = append(cn.vec.iov[:cap(cn.vec.iov)], syscall.Iovec{})
	cn.vec.pins.cover(cn, grown[5:])
	assert.Equal(t, &cn.vec.iov[0], cn.vec.pins.iov, "a grown iov array is pinned")
	cn.vec.pins.release()
	assert.Zero(t, cn.vec.pins.outEnd)
}

// Many connections at once, each with pipelined requests for a body sent
// by reference (SENDMSG: header, body) and one copied with its header
// (SEND), while the GC runs: every response is whole and exact. It guards
// what msgFor and heldPins point the kernel at (the iovecs, the header
// bytes, the out array as it grows and is covered again), not the pins
// themselves: Go's GC does not move heap objects, so it would pass without
// them (TestHeldPinsPinOnce checks what is pinned).
func TestSendsUnderGC(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16)
	small := bytes.Repeat([]byte("s"), 1500)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "small.html"), small, 0o644))
	srv := servertest.Start(t, New(), core.Config{Dir: dir}, 1)
	stop := make(chan struct{})
	var gc sync.WaitGroup
	gc.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Go(func() {
			c := servertest.Dial(t, srv.Addr)
			defer c.Close()
			paths := []string{"/big.bin", "/small.html", "/big.bin"}
			for range 5 {
				for _, p := range paths {
					fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", p)
				}
				for _, p := range paths {
					resp, err := readOne(c)
					if err != nil {
						errs <- fmt.Errorf("client %d %s: %w", i, p, err)
						return
					}
					want := big
					if p == "/small.html" {
						want = small
					}
					if !bytes.Equal(resp, want) {
						errs <- fmt.Errorf("client %d %s: %d bytes, not the file's", i, p, len(resp))
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	gc.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// readOne reads one response's body (Content-Length) off c.
func readOne(c *servertest.Client) ([]byte, error) {
	var n int
	for {
		line, err := c.R.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if line == "\r\n" {
			break
		}
		fmt.Sscanf(line, "Content-Length: %d", &n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(c.R, b)
	return b, err
}

// arrayEnd is the address just past the array b's capacity runs to, as
// heldPins.cover keeps it.
func arrayEnd(b []byte) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b))) + uintptr(cap(b))
}
