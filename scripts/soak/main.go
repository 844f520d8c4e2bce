// Command soak is the client half of scripts/soak.sh: for a bounded time it
// mixes keep-alive, close, pipelined, slow-reading (1 MiB/s and 64 KiB/s),
// non-reading, abandoning and slowloris clients against a twinloop (or
// any) server on loopback, checks every response byte for byte against the
// files on disk, times a fresh download of the largest file four times a
// second, and exits non-zero on the first mismatch, or when a fresh
// download takes longer than -probe-limit (clients that do not read must
// not hold up the others).
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twinloop/twinloop/internal/slowclient"
)

type file struct {
	path string
	body []byte
}

type counters struct {
	ok, bytes, abandoned, slowloris atomic.Int64
	stalled, dropped                atomic.Int64 // non-reading clients; those the server dropped
	probes, probeMaxUS              atomic.Int64
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "server address (loopback only)")
	dir := flag.String("dir", "", "the server's document root, to check bodies against")
	dur := flag.Duration("duration", 60*time.Second, "how long to run")
	workers := flag.Int("workers", 4, "clients of each kind")
	nonReaders := flag.Int("nonreaders", 32, "non-reading clients at any time")
	stall := flag.Duration("stall", 12*time.Second, "how long a non-reading client reads nothing (more than the server's --write-timeout)")
	probeLimit := flag.Duration("probe-limit", 2*time.Second, "longest a fresh download of the largest file may take")
	flag.Parse()
	if host, _, err := net.SplitHostPort(*addr); err != nil || !net.ParseIP(host).IsLoopback() {
		fmt.Fprintln(os.Stderr, "soak: -addr must be a loopback host:port such as 127.0.0.1:8080")
		os.Exit(2)
	}
	files, err := load(*dir)
	if err != nil || len(files) == 0 {
		fmt.Fprintf(os.Stderr, "soak: -dir %q: %v (give the server's --dir with a few files)\n", *dir, err)
		os.Exit(2)
	}
	var big, mib file // the largest file, and the largest up to 1 MiB
	for _, f := range files {
		if len(f.body) > len(big.body) {
			big = f
		}
		if len(f.body) > len(mib.body) && len(f.body) <= 1<<20 {
			mib = f
		}
	}
	deadline := time.Now().Add(*dur)
	var c counters
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	kinds := map[string]func(*rand.Rand) error{
		"keepalive":   func(r *rand.Rand) error { return keepAlive(*addr, files, r, &c, deadline) },
		"close":       func(r *rand.Rand) error { return closeEach(*addr, files, r, &c) },
		"pipeline":    func(r *rand.Rand) error { return pipeline(*addr, files, r, &c) },
		"slowread":    func(r *rand.Rand) error { return slowRead(*addr, big, 1<<20, &c) },
		"slowread64k": func(r *rand.Rand) error { return slowRead(*addr, mib, 64<<10, &c) },
		"nonread":     func(r *rand.Rand) error { return nonRead(*addr, big, *stall, deadline, &c) },
		"probe":       func(r *rand.Rand) error { return probe(*addr, big, *probeLimit, &c) },
		"abandon":     func(r *rand.Rand) error { return abandon(*addr, big, r, &c) },
		"slowloris":   func(r *rand.Rand) error { return slowloris(*addr, &c) },
	}
	for name, fn := range kinds {
		n := *workers
		if name == "nonread" {
			n = *nonReaders
		}
		for i := range n {
			wg.Add(1)
			go func(seed uint64) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, 7))
				for time.Now().Before(deadline) {
					if err := fn(r); err != nil {
						errc <- fmt.Errorf("%s: %w", name, err)
						return
					}
				}
			}(uint64(i))
		}
	}
	wg.Wait()
	close(errc)
	failed := false
	for err := range errc {
		fmt.Fprintln(os.Stderr, "soak: FAIL:", err)
		failed = true
	}
	fmt.Printf("soak: %d responses byte-exact, %d body bytes, %d abandoned, %d slowloris, %d non-reading (%d dropped by the server), %d fresh downloads of %s (slowest %.1f ms), %s\n",
		c.ok.Load(), c.bytes.Load(), c.abandoned.Load(), c.slowloris.Load(), c.stalled.Load(), c.dropped.Load(),
		c.probes.Load(), big.path, float64(c.probeMaxUS.Load())/1000, *dur)
	if failed {
		os.Exit(1)
	}
}

func load(dir string) ([]file, error) {
	var files []file
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || d.Name()[0] == '.' {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, file{path: "/" + filepath.ToSlash(rel), body: b})
		return nil
	})
	return files, err
}

func dial(addr string) (net.Conn, *bufio.Reader, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c, bufio.NewReader(c), nil
}

// check reads one response and compares it with f.
func check(br *bufio.Reader, f file, c *counters) error {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || !bytes.Equal(body, f.body) {
		at := 0
		for at < min(len(body), len(f.body)) && body[at] == f.body[at] {
			at++
		}
		return fmt.Errorf("%s: status %d, %d bytes, want 200 and %d exact bytes; first difference at byte %d: got %q",
			f.path, resp.StatusCode, len(body), len(f.body), at, body[at:min(at+48, len(body))])
	}
	c.ok.Add(1)
	c.bytes.Add(int64(len(body)))
	return nil
}

func keepAlive(addr string, files []file, r *rand.Rand, c *counters, deadline time.Time) error {
	conn, br, err := dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	for i := 0; i < 200 && time.Now().Before(deadline); i++ {
		f := files[r.IntN(len(files))]
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: soak\r\n\r\n", f.path)
		if err := check(br, f, c); err != nil {
			return err
		}
	}
	return nil
}

func closeEach(addr string, files []file, r *rand.Rand, c *counters) error {
	conn, br, err := dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	f := files[r.IntN(len(files))]
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n", f.path)
	if err := check(br, f, c); err != nil {
		return err
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return errors.New("connection not closed after Connection: close")
	}
	return nil
}

func pipeline(addr string, files []file, r *rand.Rand, c *counters) error {
	conn, br, err := dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	var req bytes.Buffer
	want := make([]file, 16)
	for i := range want {
		want[i] = files[r.IntN(len(files))]
		fmt.Fprintf(&req, "GET %s HTTP/1.1\r\nHost: soak\r\n\r\n", want[i].path)
	}
	go conn.Write(req.Bytes()) // large pipelines must not deadlock on our side
	for _, f := range want {
		if err := check(br, f, c); err != nil {
			return err
		}
	}
	return nil
}

// slowRead reads f at about rate bytes a second; at 64 KiB/s a 1 MiB file
// takes 16 s, longer than the server's write timeout, which must measure
// progress, not the whole response.
func slowRead(addr string, f file, rate int, c *counters) error {
	conn, br, err := dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Duration(len(f.body)/rate+30) * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: soak\r\n\r\n", f.path)
	return check(bufio.NewReader(&throttled{r: br, rate: rate}), f, c)
}

// nonRead asks for the largest file through a 4 KiB receive buffer and
// reads nothing for stall, longer than the server's write timeout; then
// what arrived must be a byte-exact start of the file, cut short (the
// server dropped the client) or whole.
func nonRead(addr string, f file, stall time.Duration, deadline time.Time, c *counters) error {
	conn, err := slowclient.Dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: soak\r\n\r\n", f.path)
	c.stalled.Add(1)
	time.Sleep(min(stall, time.Until(deadline)+time.Second))
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		c.dropped.Add(1) // dropped before the head was read: allowed
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	if !bytes.Equal(body, f.body[:min(len(body), len(f.body))]) {
		return fmt.Errorf("%s: the %d bytes a non-reading client got are not the file's first bytes", f.path, len(body))
	}
	if err != nil || len(body) < len(f.body) {
		c.dropped.Add(1)
	}
	return nil
}

// probe downloads the largest file on a fresh connection, as a new client
// would while the others stall, and fails when it takes longer than limit.
func probe(addr string, f file, limit time.Duration, c *counters) error {
	start := time.Now()
	conn, br, err := dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: soak\r\n\r\n", f.path)
	if err := check(br, f, c); err != nil {
		return err
	}
	took := time.Since(start)
	c.probes.Add(1)
	for us := took.Microseconds(); ; {
		old := c.probeMaxUS.Load()
		if us <= old || c.probeMaxUS.CompareAndSwap(old, us) {
			break
		}
	}
	if took > limit {
		return fmt.Errorf("a fresh download of %s took %v (limit %v)", f.path, took, limit)
	}
	time.Sleep(250 * time.Millisecond)
	return nil
}

type throttled struct {
	r    io.Reader
	rate int
}

func (t *throttled) Read(p []byte) (int, error) {
	p = p[:min(len(p), t.rate/20)]
	time.Sleep(50 * time.Millisecond)
	return t.r.Read(p)
}

// abandon starts a large response, or half a request, and walks away.
func abandon(addr string, f file, r *rand.Rand, c *counters) error {
	conn, br, err := dial(addr)
	if err != nil {
		return err
	}
	if r.IntN(2) == 0 {
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: soak\r\n\r\n", f.path)
		br.Peek(1000)
	} else {
		fmt.Fprintf(conn, "GET /index.html HTTP/1.1\r\nHo")
	}
	conn.Close()
	c.abandoned.Add(1)
	time.Sleep(10 * time.Millisecond)
	return nil
}

// slowloris drips a header a few bytes at a time, as the attack does; the
// server's header timeout bounds it, and other clients must not notice.
func slowloris(addr string, c *counters) error {
	conn, _, err := dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	req := "GET /index.html HTTP/1.1\r\nHost: soak\r\nX-Slow: " + string(bytes.Repeat([]byte("z"), 40)) + "\r\n"
	for i := 0; i < len(req); i += 4 {
		if _, err := conn.Write([]byte(req[i:min(i+4, len(req))])); err != nil {
			break // the server gave up on us: that is its right
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.slowloris.Add(1)
	return nil
}
