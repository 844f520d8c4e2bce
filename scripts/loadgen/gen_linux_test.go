package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testServer is a tiny keep-alive HTTP/1.1 server on 127.0.0.1:0: it
// answers every request with a fixed body, and notes when each request
// arrived. stallAt, when set, makes the stallAt-th request start a stall
// of stallFor during which no connection gets a response, as a server
// paused by a GC or a blocked loop would.
type testServer struct {
	ln       net.Listener
	body     []byte
	stallAt  int64
	stallFor time.Duration

	count    atomic.Int64
	until    atomic.Int64 // the stall's end, UnixNano; 0 when none
	mu       sync.Mutex
	arrivals []time.Time
	wg       sync.WaitGroup
}

func newTestServer(t *testing.T, stallAt int64, stallFor time.Duration) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &testServer{ln: ln, body: bytes.Repeat([]byte("x"), 1500), stallAt: stallAt, stallFor: stallFor}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *testServer) accept() {
	defer s.wg.Done()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		conns = append(conns, c)
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *testServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	r := bufio.NewReader(c)
	resp := append([]byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n", len(s.body))), s.body...)
	for {
		// A request is a header ending in an empty line (GET, no body).
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 {
				break
			}
		}
		now := time.Now()
		s.mu.Lock()
		s.arrivals = append(s.arrivals, now)
		s.mu.Unlock()
		if s.count.Add(1) == s.stallAt {
			s.until.Store(now.Add(s.stallFor).UnixNano())
		}
		if until := s.until.Load(); until != 0 {
			time.Sleep(time.Until(time.Unix(0, until)))
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

func (s *testServer) config(rate, conns int, d time.Duration) config {
	return config{addr: s.ln.Addr().String(), path: "/", rate: rate, conns: conns, duration: d, drain: 2 * time.Second}
}

// At a rate far below what loopback can do, the generator sends what the
// schedule asks, spread over the run rather than in bursts, and every
// response is complete and counted.
func TestRateIsTheOfferedRate(t *testing.T) {
	s := newTestServer(t, 0, 0)
	const rate = 2000
	d := 1500 * time.Millisecond
	r, err := generate(s.config(rate, 8, d))
	require.NoError(t, err)
	t.Log(r.fields(rate))

	want := int64(rate * d.Seconds())
	assert.Equal(t, want, r.offered)
	assert.Zero(t, r.errors)
	assert.Zero(t, r.non2xx)
	assert.Zero(t, r.unsent)
	assert.Zero(t, r.unfinished)
	assert.Equal(t, want, r.latency.n, "every request answered and recorded")
	assert.Equal(t, want, s.count.Load(), "the server saw as many requests as were scheduled")
	assert.InEpsilon(t, rate, r.achieved(), 0.05, "achieved rate")

	// Spread evenly: each third of the run received about a third of the
	// requests (a client that sent as fast as it could would have sent
	// them all in the first few milliseconds).
	s.mu.Lock()
	arrivals := s.arrivals
	s.mu.Unlock()
	first := arrivals[0]
	var thirds [3]int
	for _, a := range arrivals {
		k := int(a.Sub(first) * 3 / d)
		thirds[min(k, 2)]++
	}
	for k, n := range thirds {
		assert.InDelta(t, want/3, n, float64(want)/10, "third %d of the run: %v", k, thirds)
	}
}

// A server that stalls for 200 ms holds up every request the schedule
// meant to send meanwhile. Measured from the intended send time, each of
// them counts the rest of the stall: about a tenth of a two-second run's
// requests wait tens of milliseconds or more, and p99 is most of the
// stall. Measured from the actual send (what a closed-loop client sees,
// the svc histogram), the stall is one or two slow requests, hidden
// below p99.
func TestStallCountsForEveryRequestItHeldUp(t *testing.T) {
	const rate = 1000
	stall := 200 * time.Millisecond
	s := newTestServer(t, 500, stall) // half a second into the run
	r, err := generate(s.config(rate, 2, 2*time.Second))
	require.NoError(t, err)
	t.Log(r.fields(rate))
	require.Zero(t, r.errors)
	require.Zero(t, r.unfinished)

	var slow int64 // requests that waited 50 ms or more
	for i, c := range r.latency.counts {
		if upper(i) >= int64(50*time.Millisecond) {
			slow += c
		}
	}
	// The stall holds up about 200 requests; those scheduled in its first
	// 150 ms wait 50 ms or more: about 150, asserted generously.
	assert.GreaterOrEqual(t, slow, int64(100), "requests charged 50 ms or more")
	assert.GreaterOrEqual(t, r.latency.quantile(0.99), 100*time.Millisecond, "p99 from the intended time")
	assert.GreaterOrEqual(t, r.latency.max, stall*3/4, "max from the intended time")
	assert.Less(t, r.latency.quantile(0.5), 50*time.Millisecond, "p50: most requests are not held up")

	assert.Less(t, r.service.quantile(0.99), 50*time.Millisecond, "p99 from the actual send hides the stall")
	assert.GreaterOrEqual(t, r.service.max, stall/2, "the closed-loop view still sees the request in flight")

	// After the stall the schedule catches up: the run still achieves
	// about the offered rate.
	assert.InEpsilon(t, rate, r.achieved(), 0.05)
	assert.Zero(t, r.unsent)
}

func TestParseHead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		head    string
		status  int
		length  int
		closing bool
		ok      bool
	}{
		{name: "ok", head: "HTTP/1.1 200 OK\r\nContent-Length: 1500", status: 200, length: 1500, ok: true},
		{name: "case and spaces", head: "HTTP/1.1 404 Not Found\r\ncontent-length:  7 \r\nconnection: Close", status: 404, length: 7, closing: true, ok: true},
		{name: "no length", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", status: 200, length: -1},
		{name: "bad length", head: "HTTP/1.1 200 OK\r\nContent-Length: 1x"},
		{name: "not http", head: "SSH-2.0-OpenSSH_9.2p1 Debian"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, length, closing, ok := parseHead([]byte(tc.head))
			assert.Equal(t, tc.ok, ok)
			if ok {
				assert.Equal(t, tc.status, status)
				assert.Equal(t, tc.length, length)
				assert.Equal(t, tc.closing, closing)
			}
		})
	}
}
