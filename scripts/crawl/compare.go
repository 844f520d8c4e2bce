package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twinloop/twinloop/scripts/lab"
)

// compare reads crawl's lines, each prefixed by its run's labels (for
// example "bin=new round=3 ", as a loop over builds and rounds writes
// them), and prints, per phase, each build's io_uring ÷ epoll and each
// backend's build ÷ build, paired by round, with the lab's interval
// (lab.Compare: benchmath's median of the per-round ratios and its 95%
// interval, and the U test's p).
func compare(r io.Reader, w io.Writer) error {
	type key struct{ bin, backend, phase string }
	rows := map[key][][]string{}
	var bins []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := map[string]string{}
		for _, kv := range strings.Fields(sc.Text()) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		if f["cpu_us_per"] == "" || f["round"] == "" {
			continue
		}
		row := make([]string, len(lab.Rounds))
		row[slices.Index(lab.Rounds, "round")] = f["round"]
		row[slices.Index(lab.Rounds, "cpu_us_per_req")] = f["cpu_us_per"]
		k := key{f["bin"], f["backend"], f["phase"]}
		rows[k] = append(rows[k], row)
		if !slices.Contains(bins, f["bin"]) {
			bins = append(bins, f["bin"])
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	line := func(what string, a, b [][]string) {
		r, ok := lab.Compare(a, b, "cpu_us_per_req")
		if !ok {
			return
		}
		s := r.Summary
		iv := fmt.Sprintf("%.3f [%.3f, %.3f]", s.Center, s.Lo, s.Hi)
		if math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0) {
			iv = fmt.Sprintf("%.3f (n < 6)", s.Center)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.3f |\n", what, r.N, iv, r.P)
	}
	fmt.Fprintln(w, "| server CPU-µs per request, A ÷ B | rounds | ratio [95% interval] | p |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, phase := range []string{"miss", "404"} {
		for _, bin := range bins {
			line(fmt.Sprintf("%s, %s: uring ÷ epoll", phase, bin), rows[key{bin, "uring", phase}], rows[key{bin, "epoll", phase}])
		}
		for i, a := range bins {
			for _, b := range bins[i+1:] {
				for _, be := range []string{"epoll", "uring"} {
					line(fmt.Sprintf("%s, %s: %s ÷ %s", phase, be, a, b), rows[key{a, be, phase}], rows[key{b, be, phase}])
				}
			}
		}
	}
	return nil
}

// compareMain is crawl -compare FILE ("-": stdin).
func compareMain(file string) {
	in := os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, "crawl:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = f
	}
	if err := compare(in, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "crawl:", err)
		os.Exit(1)
	}
}

// roundsOf runs each build of bins (NAME=PATH,...) on each backend, once
// a round, in a new random order every round from seed (printed first,
// so that -seed repeats the order).
func roundsOf(bins, backends string, rounds int, seed int64, run func(bin, path, backend string, r int) error) error {
	type job struct{ bin, path, backend string }
	var jobs []job
	for _, b := range strings.Split(bins, ",") {
		name, path, ok := strings.Cut(b, "=")
		if !ok {
			return fmt.Errorf("-bins: want NAME=PATH, got %q", b)
		}
		for _, be := range strings.Split(backends, ",") {
			jobs = append(jobs, job{name, path, be})
		}
	}
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	fmt.Printf("seed=%d\n", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for r := 1; r <= rounds; r++ {
		rng.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
		for _, j := range jobs {
			if err := run(j.bin, j.path, j.backend, r); err != nil {
				return err
			}
		}
	}
	return nil
}
