package main

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// counterNames are the system calls twinloop counts itself (its exit
// line), as scripts/syscalls.sh compared them with strace's.
var counterNames = []string{"read", "write", "writev", "sendto", "recvfrom", "sendfile", "splice", "epoll_wait", "epoll_ctl",
	"accept4", "close", "shutdown", "setsockopt", "getsockopt", "getpeername", "getsockname", "ppoll", "fcntl", "pipe2", "kill",
	"mmap", "munmap", "io_uring_enter", "openat2", "fstat", "pread", "getdents64"}

// straceAttach starts strace -c -f on the processes (-strace: which system
// calls a request costs, by name; strace stops the server at every call,
// so the run is several times slower and batches differently). The
// returned function stops it and returns its counts.
func straceAttach(pids []int, out string) (func() map[string]int64, error) {
	args := []string{"-c", "-f", "-o", out}
	for _, p := range pids {
		args = append(args, "-p", strconv.Itoa(p))
	}
	cmd := exec.Command("strace", args...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("strace: %w", err)
	}
	time.Sleep(500 * time.Millisecond) // it says nothing when attached; it stops every thread first
	return func() map[string]int64 {
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		return parseStraceC(out)
	}, nil
}

// parseStraceC reads strace -c's table: calls by name.
func parseStraceC(path string) map[string]int64 {
	m := map[string]int64{}
	f, err := os.Open(path)
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 5 || fl[len(fl)-1] == "total" {
			continue
		}
		if _, err := strconv.ParseFloat(fl[0], 64); err != nil {
			continue
		}
		n, _ := strconv.ParseInt(fl[3], 10, 64)
		m[fl[len(fl)-1]] += n
	}
	return m
}

// exitCounters is twinloop's own count of each call (counterNames) over
// its life, from its exit line; nil for the peers.
func exitCounters(log string) map[string]int64 {
	b, _ := os.ReadFile(log)
	for _, l := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(l, "server: stopped; ")
		if !ok {
			continue
		}
		m := map[string]int64{}
		for _, kv := range strings.Fields(rest) {
			k, v, _ := strings.Cut(kv, "=")
			if slices.Contains(counterNames, k) || k == "sqes" || k == "cqes" {
				if k == "pread" {
					k = "pread64"
				}
				m[k], _ = strconv.ParseInt(v, 10, 64)
			}
		}
		return m
	}
	return nil
}

// writeStraceTable appends a cell's table to OUT/syscalls.md: strace's
// calls per request beside twinloop's counters (over the server's life:
// run with -warmup 0 so that it is the measured run's).
func (r *runner) writeStraceTable(title string, requests int64, st, own map[string]int64) error {
	f, err := os.OpenFile(filepath.Join(r.out, "syscalls.md"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if requests == 0 {
		requests = 1
	}
	var names []string
	for k := range st {
		names = append(names, k)
	}
	for k := range own {
		if k == "fstat" && st["fstat"] == 0 && st["newfstatat"] > 0 {
			continue
		}
		if k != "sqes" && k != "cqes" && !slices.Contains(names, k) && own[k] > 0 {
			names = append(names, k)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(st[b], st[a]), cmp.Compare(own[b], own[a]), cmp.Compare(a, b))
	})
	fmt.Fprintf(f, "## %s\n\n%d requests under strace -c -f.\n\n", title, requests)
	per := func(n int64) string { return fmt.Sprintf("%.3f", float64(n)/float64(requests)) }
	if own != nil {
		fmt.Fprint(f, "| syscall | strace calls | strace / req | twinloop counter | counter / req |\n|---|---:|---:|---:|---:|\n")
	} else {
		fmt.Fprint(f, "| syscall | strace calls | strace / req |\n|---|---:|---:|\n")
	}
	var ts, tc int64
	for _, k := range names {
		o, ok := own[k]
		if k == "newfstatat" && own["fstat"] > 0 {
			o, ok = own["fstat"], true
		}
		ts += st[k]
		tc += o
		switch {
		case own == nil:
			fmt.Fprintf(f, "| %s | %d | %s |\n", k, st[k], per(st[k]))
		case ok:
			fmt.Fprintf(f, "| %s | %d | %s | %d | %s |\n", k, st[k], per(st[k]), o, per(o))
		default:
			fmt.Fprintf(f, "| %s | %d | %s | | |\n", k, st[k], per(st[k]))
		}
	}
	if own != nil {
		fmt.Fprintf(f, "| **total** | %d | **%.2f** | %d | **%.2f** |\n", ts, float64(ts)/float64(requests), tc, float64(tc)/float64(requests))
		if own["sqes"]+own["cqes"] > 0 {
			fmt.Fprintf(f, "| (io_uring SQEs submitted) | | | %d | %s |\n| (io_uring CQEs reaped) | | | %d | %s |\n",
				own["sqes"], per(own["sqes"]), own["cqes"], per(own["cqes"]))
		}
	} else {
		fmt.Fprintf(f, "| **total** | %d | **%.2f** |\n", ts, float64(ts)/float64(requests))
	}
	fmt.Fprintln(f)
	return nil
}
