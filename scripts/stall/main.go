// Command stall measures what clients that do not read cost the others
// (issue 9): it opens -n connections that each ask for -path through a
// 4 KiB receive buffer and then read nothing, and, before and while they
// stall, times fresh downloads of the -fresh paths (byte-exact against
// -dir) and counts the server's io_uring worker threads (iou-wrk-* in
// /proc/PID/task). Loopback only; it stops by itself.
//
//	stall -addr 127.0.0.1:18300 -dir DOCROOT -pid PID -n 300 -path /4m.bin -fresh /200k.bin,/4m.bin
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
	"path/filepath"
	"strings"
	"time"

	"github.com/twinloop/twinloop/internal/slowclient"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "server address (loopback only)")
	dir := flag.String("dir", "", "the server's document root, to check bodies against")
	pid := flag.Int("pid", 0, "the server's process id, to count its io_uring worker threads")
	n := flag.Int("n", 300, "clients that ask and never read")
	path := flag.String("path", "/4m.bin", "what the stalled clients ask for")
	fresh := flag.String("fresh", "/200k.bin,/4m.bin", "comma-separated paths a fresh client downloads")
	limit := flag.Duration("limit", 10*time.Second, "give up on a fresh download after this")
	flag.Parse()
	if host, _, err := net.SplitHostPort(*addr); err != nil || !net.ParseIP(host).IsLoopback() {
		fmt.Fprintln(os.Stderr, "stall: -addr must be a loopback host:port such as 127.0.0.1:8080")
		os.Exit(2)
	}
	paths := strings.Split(*fresh, ",")
	ok := report("idle", *addr, *dir, *pid, paths, *limit)
	conns := make([]net.Conn, 0, *n)
	for range *n {
		c, err := slowclient.Dial(*addr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "stall: dial: %v (raise ulimit -n?)\n", err)
			os.Exit(1)
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: stall\r\n\r\n", *path)
		conns = append(conns, c)
	}
	time.Sleep(time.Second) // the server fills their sockets
	for i := range 3 {
		ok = report(fmt.Sprintf("%d stalled (%d)", *n, i+1), *addr, *dir, *pid, paths, *limit) && ok
	}
	for _, c := range conns {
		c.Close()
	}
	if !ok {
		os.Exit(1)
	}
}

// report times one fresh download of each path and prints one line.
func report(label, addr, dir string, pid int, paths []string, limit time.Duration) bool {
	ok := true
	line := fmt.Sprintf("%s: iou_wrk=%d", label, workers(pid))
	for _, p := range paths {
		d, err := download(addr, dir, p, limit)
		if err != nil {
			ok = false
			line += fmt.Sprintf(" %s=FAIL(%v)", p, err)
			continue
		}
		line += fmt.Sprintf(" %s=%.1fms", p, float64(d.Microseconds())/1000)
	}
	fmt.Println(line + fmt.Sprintf(" iou_wrk_after=%d", workers(pid)))
	return ok
}

func download(addr, dir, path string, limit time.Duration) (time.Duration, error) {
	want, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path)))
	if err != nil {
		return 0, err
	}
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, limit)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(start.Add(limit))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: stall\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("%d of %d bytes: %w", len(body), len(want), err)
	}
	if resp.StatusCode != 200 || !bytes.Equal(body, want) {
		return 0, fmt.Errorf("status %d, %d bytes, want 200 and %d exact bytes", resp.StatusCode, len(body), len(want))
	}
	return time.Since(start), nil
}

// workers counts the io_uring worker threads of process pid.
func workers(pid int) int {
	if pid <= 0 {
		return 0
	}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/comm", pid, e.Name()))
		if err == nil && strings.HasPrefix(string(b), "iou-wrk") {
			n++
		}
	}
	return n
}
