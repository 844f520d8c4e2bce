package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/twinloop/twinloop/scripts/lab"
)

// kind is one kind of request the tool measures; the doc.go lists name
// kinds by key.
type kind struct {
	key, title string
	// paths returns the request paths of a run of n requests: the same
	// file n times, or n files the server has not served yet.
	paths func(n int) []string
}

var kinds = []kind{
	{key: "small", title: "a cached 1.5 KB file", paths: same("/small.html")},
	{key: "large", title: "a cached 1 MiB file, in the page cache", paths: same("/large.bin")},
	{key: "miss", title: "a warm miss: a file the server has not cached, in the page cache", paths: func(n int) []string {
		var ps []string
		for i := range n {
			ps = append(ps, "/"+missName(i))
		}
		return ps
	}},
}

func same(p string) func(int) []string {
	return func(n int) []string {
		ps := make([]string, n)
		for i := range ps {
			ps[i] = p
		}
		return ps
	}
}

func missName(i int) string { return fmt.Sprintf("miss-%03d.html", i) }

// makeFiles writes the files every kind asks for into dir.
func makeFiles(dir string, misses int) error {
	small := bytes.Repeat([]byte("<p>pathwidth</p>\n"), 100)[:1500]
	files := map[string][]byte{"small.html": small, "large.bin": bytes.Repeat([]byte{'x'}, 1<<20)}
	for i := range misses {
		files[missName(i)] = small
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		// Synced, so that no writeback runs while a server reads them.
		if _, err := f.Write(body); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// warm reads every file in dir, so that its pages and its dentry are in
// the kernel's caches when a server starts.
func warm(dir string) error {
	es, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range es {
		if _, err := os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// cacheDrops counts the writes to /proc/sys/vm/drop_caches since boot
// (/proc/vmstat's drop_pagecache and drop_slab): a run during which one
// came found its warm files cold, or their dentries gone.
func cacheDrops() string {
	b, _ := os.ReadFile("/proc/vmstat")
	var drops []string
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "drop_") {
			drops = append(drops, strings.TrimSpace(line))
		}
	}
	return strings.Join(drops, ", ")
}

// serve runs the coverage-built server on backend with one loop and the
// default flags, asks for paths one after the other on one keep-alive
// connection, stops it with SIGINT, and leaves its counters in covdir.
//
// The run spans whole seconds of the clock, at least secs of them: it
// starts in the first half of a second and stops 0.9 s into the last, so
// that the loop's once-a-second work (core.Loop.Tick: a scan of every
// connection slot, hundreds of blocks) runs secs times, as in the other
// run of the pair. It returns how many seconds it spanned.
//
// With isolated, the server and its client are in a network namespace of
// their own (isolate) and the port is theirs; otherwise the first free
// one from port up is taken.
func serve(server, backend, dir string, port int, isolated bool, paths []string, gap time.Duration, secs int, covdir string) (int, error) {
	type result struct {
		secs int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see isolate
		var err error
		if isolated {
			err = isolate()
		} else {
			port, err = freePort(port)
		}
		if err != nil {
			done <- result{err: err}
			return
		}
		secs, err := serveOn(server, backend, dir, fmt.Sprintf("127.0.0.1:%d", port), paths, gap, secs, covdir)
		done <- result{secs, err}
	}()
	r := <-done
	return r.secs, r.err
}

func serveOn(server, backend, dir, addr string, paths []string, gap time.Duration, secs int, covdir string) (int, error) {
	if now := time.Now(); now.Nanosecond() > 5e8 {
		time.Sleep(now.Truncate(time.Second).Add(time.Second).Sub(now))
	}
	second := time.Now().Truncate(time.Second)
	cmd := exec.Command(server, "--backend", backend, "--loops=1", "--listen", addr, "--dir", dir)
	cmd.Env = append(os.Environ(), "GOCOVERDIR="+covdir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	reqErr := request(addr, paths, gap)
	stop := second.Add(time.Duration(secs)*time.Second + 900*time.Millisecond)
	for ; time.Until(stop) < 10*time.Millisecond; secs++ {
		stop = stop.Add(time.Second)
	}
	time.Sleep(time.Until(stop))
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("the server: %v\n%s", err, out.Bytes())
	}
	if reqErr != nil {
		return 0, fmt.Errorf("%v\n%s", reqErr, out.Bytes())
	}
	// Its counters say it served them all: no other server shared the port.
	m := servedRE.FindSubmatch(out.Bytes())
	if m == nil {
		return 0, fmt.Errorf("the server printed no counters:\n%s", out.Bytes())
	}
	if n, _ := strconv.Atoi(string(m[1])); n != len(paths) {
		return 0, fmt.Errorf("the server served %d requests of %d:\n%s", n, len(paths), out.Bytes())
	}
	return secs, nil
}

var servedRE = regexp.MustCompile(`stopped; requests=(\d+)`)

// freePort returns the first port from base up that nothing listens on.
// A server that shares a port with SO_REUSEPORT is refused by a listener
// without it, so another twinloop cannot take a share of the requests.
// Ports are below 32768, the kernel's ephemeral range, where no client
// socket can hold one.
func freePort(base int) (int, error) {
	for p := base; p < base+100; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			l.Close()
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port in %d-%d", base, base+99)
}

// request waits for the server to listen, then asks for each path on one
// connection, each gap after the last answer: no pipelining, which takes
// a path of its own, and time for the loop to finish with one request and
// go back to sleep before the next, so that each takes the same path (an
// idle loop's) whatever the machine's load. It then closes its side and
// waits for the server to close too, so that every run ends the same way.
func request(addr string, paths []string, gap time.Duration) error {
	c, err := lab.DialServer(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReaderSize(c, 64<<10)
	for i, p := range paths {
		time.Sleep(gap)
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: pathwidth\r\n\r\n", p); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return fmt.Errorf("request %d, %s: %w", i, p, err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("request %d, %s: %w", i, p, err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("request %d, %s: %s", i, p, resp.Status)
		}
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	if n, err := br.Read(make([]byte, 1)); n > 0 || err != io.EOF {
		return fmt.Errorf("after the last answer: %d bytes, %v; want the server's close", n, err)
	}
	return nil
}
