// Command crawl measures what a cache miss costs the server, as a crawler
// causes them (issue 37): it starts the server with one loop, then over
// one keep-alive connection pipelines -n distinct warm files (each a
// miss: none was asked for before) and then -n names that do not exist
// (each a 404), and reads the server's own CPU (utime+stime from
// /proc/PID/stat) and its counters (--metrics) before and after each
// phase.
//
//	go build -o bin/server ./cmd/server
//	go run ./scripts/crawl -server bin/server -backend uring -n 5000 -runs 3
//	go run ./scripts/crawl -compare lines.txt   (rounds of two builds: intervals)
//
// The files are made once in -dir (1.5 KB each) and read before every
// run, so that their pages and dentries are in the kernel's caches: the
// miss is warm. Each run starts a fresh server, whose own cache is empty.
// It prints one line per run and phase:
//
//	backend=uring run=1 phase=miss n=5000 cpu_us_per=28.0 syscalls_per=6.1 enters_per=1.0 sqes_per=2.0 fs_ops=0 fs_inline=5000
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twinloop/twinloop/scripts/lab"
)

func main() {
	server := flag.String("server", "bin/server", "the server binary")
	backend := flag.String("backend", "epoll", "--backend")
	n := flag.Int("n", 5000, "distinct files, then missing names, per run")
	runs := flag.Int("runs", 3, "runs, each with a fresh server")
	dir := flag.String("dir", "/tmp/twinloop-crawl", "where the files are made")
	port := flag.Int("port", 21590, "the server's port on 127.0.0.1, and the next one for --metrics")
	extra := flag.String("args", "", "more server flags, space-separated")
	bins := flag.String("bins", "", "NAME=PATH,...: run every build on every backend of -backends, -rounds rounds in a new random order each (the seed printed first), each line prefixed by bin=NAME round=R, for -compare")
	backends := flag.String("backends", "epoll,uring", "with -bins: the backends")
	rounds := flag.Int("rounds", 8, "with -bins: rounds")
	seed := flag.Int64("seed", 0, "with -bins: the order's seed (0: from the clock)")
	cmp := flag.String("compare", "", "instead of running: read crawl's lines, each prefixed by bin=NAME round=R, from this file (- for stdin) and print io_uring ÷ epoll and build ÷ build, paired by round, with 95% intervals")
	flag.Parse()
	if *cmp != "" {
		compareMain(*cmp)
		return
	}
	if err := makeFiles(*dir, *n); err != nil {
		fail(err)
	}
	if *bins != "" {
		if err := roundsOf(*bins, *backends, *rounds, *seed, func(bin, path, backend string, r int) error {
			return run(path, backend, *dir, *n, *port, strings.Fields(*extra), 1, fmt.Sprintf("bin=%s round=%d ", bin, r))
		}); err != nil {
			fail(err)
		}
		return
	}
	for r := 1; r <= *runs; r++ {
		if err := run(*server, *backend, *dir, *n, *port, strings.Fields(*extra), r, ""); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "crawl:", err)
	os.Exit(1)
}

func fileName(i int) string    { return fmt.Sprintf("f%06d.html", i) }
func missingName(i int) string { return fmt.Sprintf("nope-%d", i) }

func makeFiles(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	body := bytes.Repeat([]byte("<p>crawl</p>\n"), 116)[:1500]
	for i := range n {
		p := filepath.Join(dir, fileName(i))
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// warm reads every file, so that its pages and its dentry are cached,
// and looks every missing name up, so that the kernel caches that it is
// missing (a negative dentry): the 404s are warm too.
func warm(dir string, n int) error {
	for i := range n {
		if _, err := os.ReadFile(filepath.Join(dir, fileName(i))); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(dir, missingName(i))); !os.IsNotExist(err) {
			return fmt.Errorf("%s: want it missing, got %v", missingName(i), err)
		}
	}
	return nil
}

// run runs the server once, and prints each phase's line after prefix.
func run(server, backend, dir string, n, port int, extra []string, r int, prefix string) error {
	if err := warm(dir, n); err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	maddr := fmt.Sprintf("127.0.0.1:%d", port+1)
	args := append([]string{"--backend", backend, "--loops", "1", "--listen", addr, "--metrics", maddr, "--dir", dir}, extra...)
	cmd := exec.Command(server, args...)
	var serr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &serr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			fmt.Fprintf(os.Stderr, "crawl: the server: %v\n%s", err, serr.Bytes())
		}
	}()
	c, err := lab.DialServer(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	br := bufio.NewReaderSize(c, 1<<16)
	for _, ph := range []struct {
		name   string
		file   func(int) string
		status int
	}{{"miss", fileName, 200}, {"404", missingName, 404}} {
		before, err := sample(cmd.Process.Pid, maddr)
		if err != nil {
			return err
		}
		if err := crawl(c, br, ph.file, ph.status, n); err != nil {
			return fmt.Errorf("%s: %w", ph.name, err)
		}
		after, err := sample(cmd.Process.Pid, maddr)
		if err != nil {
			return err
		}
		per := func(k string) float64 { return (after.m[k] - before.m[k]) / float64(n) }
		fmt.Printf("%sbackend=%s run=%d phase=%s n=%d cpu_us_per=%.1f syscalls_per=%.2f enters_per=%.2f sqes_per=%.2f fs_ops=%.0f fs_inline=%.0f\n",
			prefix, backend, r, ph.name, n, float64(after.cpu-before.cpu)/float64(n), per("syscalls"), per("enters"), per("sqes"),
			after.m["fs_ops"]-before.m["fs_ops"], after.m["fs_inline"]-before.m["fs_inline"])
	}
	return nil
}

// crawl pipelines n GETs of /file(i) and reads the n answers, each of
// status.
func crawl(c net.Conn, br *bufio.Reader, file func(int) string, status, n int) error {
	errc := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(c, 1<<16)
		for i := range n {
			fmt.Fprintf(w, "GET /%s HTTP/1.1\r\nHost: crawl\r\n\r\n", file(i))
		}
		errc <- w.Flush()
	}()
	for i := range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return fmt.Errorf("response %d: %w", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != status {
			return fmt.Errorf("response %d: %s, want %d", i, resp.Status, status)
		}
	}
	return <-errc
}

type snap struct {
	cpu int64 // utime+stime, microseconds
	m   map[string]float64
}

// sample reads the server's CPU and, once the loop has published them
// (once a second), its counters.
func sample(pid int, maddr string) (snap, error) {
	time.Sleep(1100 * time.Millisecond)
	s := snap{m: map[string]float64{}}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	s.cpu = (ut + st) * 1e6 / 100 // USER_HZ
	resp, err := http.Get("http://" + maddr + "/metrics")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name := line[:sp]
		switch {
		case strings.HasPrefix(name, "twinloop_syscalls_total"):
			s.m["syscalls"] += v
			if strings.Contains(name, `kind="io_uring_enter"`) {
				s.m["enters"] += v
			}
		case strings.HasPrefix(name, "twinloop_uring_sqes_total"):
			s.m["sqes"] += v
		case strings.HasPrefix(name, "twinloop_fs_ops_total"):
			s.m["fs_ops"] += v
		case strings.HasPrefix(name, "twinloop_fs_inline_total"):
			s.m["fs_inline"] += v
		}
	}
	return s, sc.Err()
}
