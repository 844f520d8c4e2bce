package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// smapsKinds is the processes' resident memory by kind of mapping, in
// KiB, from /proc/PID/smaps (was scripts/c10k-rss.sh's breakdown): all,
// io_uring's (the SQ/CQ rings and the SQE array), the executable's (the
// server's binary, or nginx's), anonymous (heap, stacks, Go's arenas),
// and the rest (libraries, vdso, ...). Read while the load runs, every
// connection open.
func smapsKinds(pids []int) (rss, uring, binary, anon, other int64) {
	for _, p := range pids {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p))
		f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", p))
		if err != nil {
			continue
		}
		name := ""
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fl := strings.Fields(sc.Text())
			if len(fl) >= 5 && strings.Contains(fl[0], "-") && !strings.HasSuffix(fl[0], ":") {
				name = strings.Join(fl[5:], " ")
				continue
			}
			if len(fl) < 2 || fl[0] != "Rss:" {
				continue
			}
			k, _ := strconv.ParseInt(fl[1], 10, 64)
			rss += k
			switch {
			case strings.Contains(name, "io_uring"):
				uring += k
			case name == exe || strings.HasSuffix(name, "/nginx"):
				binary += k
			case name == "" || name == "[heap]":
				anon += k
			default:
				other += k
			}
		}
		f.Close()
	}
	return
}

// midRun reads the breakdown halfway through the measured run and, with
// -memdump, asks a twinloop built with -tags memdump for runtime/metrics'
// memory classes (SIGUSR2; cmd/server/memdump.go writes metrics.txt into
// TWINLOOP_MEMDUMP), copied to OUT/memdump/. It returns rounds.csv's
// columns once the run is over.
func (r *runner) midRun(sv *server, twinloop bool, d time.Duration, tag string) func() []string {
	done := make(chan []string, 1)
	go func() {
		time.Sleep(d / 2)
		rss, ur, bin, anon, other := smapsKinds(sv.pids)
		cols := []string{fmt.Sprintf("smaps_rss_kb=%d", rss), fmt.Sprintf("smaps_uring_kb=%d", ur),
			fmt.Sprintf("smaps_binary_kb=%d", bin), fmt.Sprintf("smaps_anon_kb=%d", anon), fmt.Sprintf("smaps_other_kb=%d", other)}
		if r.memdump && twinloop && sv.memdump != "" {
			sv.cmd.Process.Signal(syscall.SIGUSR2)
			m := filepath.Join(sv.memdump, "metrics.txt")
			for i := 0; i < 30; i++ {
				if st, err := os.Stat(m); err == nil && st.Size() > 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err := copyFile(m, filepath.Join(r.out, "memdump", tag+".txt")); err != nil {
				logf("%s: no runtime/metrics dump (%v): is the binary built with -tags memdump?", tag, err)
			}
		}
		done <- cols
	}()
	return func() []string { return <-done }
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	defer out.Close()
	_, err = io.Copy(out, in)
	return err
}
