// Command kentry measures what one entry into the kernel costs on the
// machine that runs the study (issue 36 item 5), so that STUDY.md can
// account for the headline as syscalls saved per request times their cost.
// Its benchmarks (kentry_linux_test.go) time, in ns per call, each call
// made as the backends make it (raw, on a thread pinned to one CPU):
// getppid(2) through syscall.Syscall and syscall.RawSyscall (the bare
// entry and exit, with and without the runtime's bookkeeping);
// epoll_wait(2) with a zero timeout on one idle socket; io_uring_enter(2)
// with nothing to do; an IORING_OP_NOP submitted and reaped in one enter;
// a 1-byte write and read over AF_UNIX and over TCP on 127.0.0.1; and
// sendfile(2) of 1,500 bytes from a page-cached file to a TCP socket,
// drained by a read, beside write(2) of the same bytes and the read alone.
//
//	kentry -run -test bin/kentry.test [-rounds 20] [-benchtime 200ms] [-cpu 0]
//	kentry -dir results/2026-12-06_abc1234_kentry
//
// With -run (make kentry) it writes results/<date>_<commit>_kentry/:
// env.txt (scripts/lab), bench.txt and summary.md. Each round runs every
// benchmark once, in its own process under taskset, in an order shuffled
// from a seed env.txt records, so that a drift of the machine spreads over
// all rows instead of landing on the ones that ran late. bench.txt is Go's
// benchmark format (benchstat reads it). With -dir it rewrites summary.md
// from the folder's bench.txt and env.txt (scripts/lab/kentry.go; make
// study can do the same once a kentry folder is committed and scripts/plot
// given a mode for it).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/twinloop/twinloop/scripts/lab"
)

func main() {
	var (
		run       = flag.Bool("run", false, "run the benchmarks into a new results folder")
		testBin   = flag.String("test", "bin/kentry.test", "the benchmarks' test binary (go test -c ./scripts/kentry)")
		rounds    = flag.Int("rounds", 20, "rounds: each runs every benchmark once")
		benchtime = flag.String("benchtime", "200ms", "each benchmark's -test.benchtime")
		cpu       = flag.String("cpu", "0", "the CPU the benchmarks run on (taskset -c)")
		seed      = flag.Uint64("seed", 0, "the order's seed (0: from the clock)")
		results   = flag.String("results", "results", "where -run makes its folder")
		dir       = flag.String("dir", "", "rewrite this folder's summary.md from its bench.txt and env.txt")
	)
	flag.Parse()
	var err error
	switch {
	case *run:
		if *seed == 0 {
			*seed = uint64(time.Now().UnixNano())
		}
		err = runAll(*results, *testBin, *cpu, *benchtime, *rounds, *seed)
	case *dir != "":
		err = lab.WriteKentrySummary(*dir)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kentry:", err)
		os.Exit(1)
	}
}

// runAll makes the results folder and fills it.
func runAll(results, testBin, cpu, benchtime string, rounds int, seed uint64) error {
	commit, err := exec.Command("git", "rev-parse", "--short=7", "HEAD").Output()
	if err != nil {
		return fmt.Errorf("git rev-parse: %v", err)
	}
	base := filepath.Join(results, time.Now().Format("2006-01-02")+"_"+strings.TrimSpace(string(commit))+"_kentry")
	dir := base
	for i := 2; ; i++ {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			break
		}
		dir = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names, err := list(testBin)
	if err != nil {
		return err
	}

	envf, err := os.Create(filepath.Join(dir, "env.txt"))
	if err != nil {
		return err
	}
	defer envf.Close()
	env := lab.Env{Root: "."}
	if err := env.Write(envf, "start"); err != nil {
		return err
	}
	fmt.Fprintf(envf, "kentry: %d rounds, each benchmark once per round for -benchtime %s on CPU %s (taskset), order shuffled with seed %d\n",
		rounds, benchtime, cpu, seed)

	benchf, err := os.Create(filepath.Join(dir, "bench.txt"))
	if err != nil {
		return err
	}
	defer benchf.Close()
	rng := rand.New(rand.NewPCG(seed, 0))
	seen := map[string]bool{} // config and skip lines, written once
	start := time.Now()
	for r := 1; r <= rounds; r++ {
		rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		fmt.Fprintf(os.Stderr, "kentry: round %d/%d (%s)\n", r, rounds, time.Since(start).Round(time.Second))
		for _, name := range names {
			out, err := exec.Command("taskset", "-c", cpu, testBin, "-test.run", "^$",
				"-test.bench", "^"+name+"$", "-test.benchtime", benchtime, "-test.count", "1", "-test.v").CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s: %v\n%s", name, err, out)
			}
			if err := keep(benchf, out, seen); err != nil {
				return err
			}
		}
	}
	env.WriteLoad(envf, "end")
	if err := benchf.Close(); err != nil {
		return err
	}
	if err := envf.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "kentry: %d rounds in %s into %s\n", rounds, time.Since(start).Round(time.Second), dir)
	return lab.WriteKentrySummary(dir)
}

// list is the test binary's benchmarks.
func list(testBin string) ([]string, error) {
	out, err := exec.Command(testBin, "-test.list", "^Benchmark").Output()
	if err != nil {
		return nil, fmt.Errorf("%s -test.list: %v", testBin, err)
	}
	names := strings.Fields(string(out))
	if len(names) == 0 {
		return nil, fmt.Errorf("%s lists no benchmarks", testBin)
	}
	return names, nil
}

var configLine = regexp.MustCompile(`^[a-z][a-zA-Z0-9_-]*: `)

// keep copies what bench.txt needs from one run's output (-test.v) to w:
// the result lines and, the first time each is met, the configuration
// lines (goos, cpu, ...) and a benchmark's skip, followed by its reason
// (which -test.v prints before it).
func keep(w io.Writer, out []byte, seen map[string]bool) error {
	var b bytes.Buffer
	var logged []string // the indented lines since the last benchmark's name
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Benchmark"):
			logged = logged[:0]
			if len(strings.Fields(line)) > 2 { // not -test.v's bare name
				b.WriteString(line + "\n")
			}
		case strings.HasPrefix(line, "    "):
			logged = append(logged, line)
		case strings.HasPrefix(line, "--- SKIP: "):
			if !seen[line] {
				seen[line] = true
				b.WriteString(line + "\n")
				for _, l := range logged {
					b.WriteString(l + "\n")
				}
			}
			logged = logged[:0]
		case configLine.MatchString(line):
			if !seen[line] {
				seen[line] = true
				b.WriteString(line + "\n")
			}
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}
