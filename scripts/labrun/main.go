// Command labrun is the lab's driver (issue 36): it runs the cells of a
// steps file (scripts/steps/*.steps, format in scripts/lab/steps.go) in
// rounds, each round in a new random order drawn from a recorded seed
// with the compared steps in one block, and writes
// results/<date>_<commit>_<name>/: rounds.csv (a row per cell and
// round), bench.txt (benchstat's format), env.txt (the machine at start
// and end, the seed, rounds and durations, steal), summary.md (each
// cell's median with its 95% interval, each comparison as the median
// per-round ratio with its interval and a p-value) and intervals.png
// (scripts/plot -labrun); a plan with rate:N steps also latency.csv
// (every measured run's latency histogram, loadgen -hist) and
// fixed-rate.png, and summary.md's "Fixed rate" section (p50, p99 and
// p99.9 with their intervals).
//
//	labrun -steps scripts/steps/headline.steps [-quick] [-seed N] [-rounds N] [-duration 5s]
//	labrun -steps FILE -bins old=PATH,new=PATH    steps flagged @old / @new run those builds
//	labrun -steps scripts/steps/cold.steps [-cold-dir DIR] [-throttle-iops N] [-throttle-bps N]    as root
//	labrun -steps scripts/steps/syscalls.steps -only epoll-keepalive -strace -warmup 0 -rounds 1    syscalls.md
//	labrun -steps scripts/steps/c10k-rss.steps -smaps [-memdump -bin MEMDUMP-BUILD]    memory by mapping
//	labrun -steps scripts/steps/scaling.steps -fit    leave out the steps this machine cannot place
//	labrun -steps scripts/steps/cluster-proxy.steps [-ports 21750-21799]    HAProxy in front of 3 instances
//	labrun summarize DIR    rewrites DIR/summary.md from rounds.csv and env.txt
//
// Each cell: a fresh server pinned to its step's CPUs (0), a warm-up
// run, the quiet gate (the machine idle, other processes' CPU under 5%
// of one CPU; how long it waited is recorded), then one measured run
// with the meters around it, then the server is stopped (twinloop's
// exit line gives its syscalls). The load is wrk -t1 pinned to CPU 1;
// a step on cpus first:N has the server on the machine's first N CPUs
// and wrk on all the others, a thread each (a step that needs more CPUs
// than the machine has is refused, or left out with -fit); a rate:N
// step is scripts/loadgen at N req/s, open loop. A cold:SET step (make
// cold, scripts/steps/cold.steps) is files from a throttled disk beside a
// cached page: the run makes the plan's coldset files once under
// -cold-dir, a cgroup capping reads of their disk (-throttle-iops,
// -throttle-bps: cgroup v1 blkio or v2 io.max, written here, removed at
// the end) and checks that it holds (throttle.txt); each cell drops the
// sets from the page cache (-cold-drop), reads the servers' binaries back,
// starts the server and moves it into the cgroup, warms the cached page,
// then runs at once wrk -c<step's connections> -s scripts/cold.lua on the
// set's files (random order, no repeats) and wrk -c<hot> on the cached
// page; rounds.csv gets the page's latency and req/s beside the set's
// MB/s and files/s, and cold.csv scripts/cold.sh's table (scripts/plot
// -cold). A cgi-beside step (uring-wait.steps, cgi.steps) times, on one
// server with --cgi-dir and --metrics, a CGI script alone, then the
// script and /metrics GETs beside keep-alive load, then SIGTERM to exit
// under that load (cgi.go); a step of size cgi asks the CGI script. A
// plan with an evict line drops each cell's file from the page cache
// (POSIX_FADV_DONTNEED) after its warm-up, before its measured run
// (cold1m-c10k.steps). A
// proxy:OPTS step (cluster-proxy.steps) starts the plan's instances
// servers of the step, and HAProxy on the step's CPUs in front of them
// from a config rendered from OPTS (lab.HAProxyConfig: mode http or tcp,
// send-proxy-v2, prefer-last-server, http-reuse never), aims wrk at
// HAProxy and counts server connections per 1000 requests: the
// instances' accepts (their exit lines) and HAProxy's connects and
// reuses (show stat on its admin socket; proxy.go). -ports FIRST-LAST
// moves the lab's ports (21000-21099). A
// plan with a netns line runs the server and the load
// generator in the two network namespaces it names (ip netns exec;
// scripts/veth.sh makes them), at its host address. Binaries are built
// static (CGO_ENABLED=0), so make lab-kit's copy runs on a machine with
// wrk and neither Go nor package access. Progress goes to stderr.
// -quiet=false skips the gate, for development only: the summary then
// says the run is not a result.
package main

import (
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twinloop/twinloop/scripts/lab"
)

type runner struct {
	root, work, docroot, out string
	bins                     map[string]string // server, peers, gohttp
	plan                     lab.Plan
	stepsFile                string
	rounds                   int
	duration, warmup         time.Duration
	quiet                    bool
	quietMax                 time.Duration
	seed                     uint64
	planned                  int // the steps file's steps, before -only
	wrkCPU                   string
	loadgen                  string                   // -loadgen
	place                    map[string]lab.Placement // by step id
	unfit                    []string                 // the steps -fit left out, and why
	port                     int
	ports                    [2]int // -ports: the lab's range of ports
	csv                      *csv.Writer
	latency                  *csv.Writer // latency.csv: the rate:N cells' histograms
	rows                     [][]string
	cold                     *cold  // the plan has cold:SET steps
	note                     string // -note
	cgiDir                   string // the CGI script's folder, for cgi-beside steps
	strace                   bool   // -strace: syscalls.md
	smaps, memdump           bool   // -smaps, -memdump: memory by mapping, runtime/metrics
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "summarize" {
		if err := lab.Summarize(os.Args[2]); err != nil {
			fatal(err)
		}
		return
	}
	r := &runner{bins: map[string]string{}}
	steps := flag.String("steps", "", "the steps file (scripts/steps/NAME.steps)")
	name := flag.String("name", "", "the results folder's name (default: the steps file's)")
	flag.IntVar(&r.rounds, "rounds", 0, "rounds (default: the steps file's; 6 with -quick)")
	flag.DurationVar(&r.duration, "duration", 5*time.Second, "each measured wrk run (1s with -quick)")
	flag.DurationVar(&r.warmup, "warmup", time.Second, "the warm-up wrk run before it (0 with -quick)")
	seed := flag.Uint64("seed", 0, "the order's seed (default: from the clock; env.txt records it)")
	quick := flag.Bool("quick", false, "fewer, shorter rounds: checks the lab works, not a result")
	flag.BoolVar(&r.quiet, "quiet", true, "wait for an idle machine before each cell (false: development only)")
	flag.DurationVar(&r.quietMax, "quiet-max", 2*time.Minute, "the longest the quiet gate waits")
	results := flag.String("results", "results", "where the run's folder goes")
	bin := flag.String("bin", "", "the twinloop binary (default: built from the work tree)")
	flag.StringVar(&r.loadgen, "loadgen", "", "scripts/loadgen's binary, for rate:N steps (default: built from the work tree)")
	bins := flag.String("bins", "", "NAME=PATH,...: the twinloop binaries steps with an @NAME flag run (two builds compared)")
	flag.StringVar(&r.wrkCPU, "wrk-cpu", "1", "the CPUs wrk runs on (taskset list)")
	only := flag.String("only", "", "comma-separated step ids: run only these (to try a few)")
	cd := &cold{}
	flag.StringVar(&cd.dir, "cold-dir", "/var/tmp/twinloop-cold", "cold cells: where the cold sets are made, once (on a disk, not tmpfs)")
	flag.Int64Var(&cd.iops, "throttle-iops", 300, "cold cells: the server's reads/s from the sets' disk (blkio cgroup; 0: no cap)")
	flag.Int64Var(&cd.bps, "throttle-bps", 80000000, "cold cells: the server's read bytes/s from the sets' disk (0: no cap)")
	flag.StringVar(&cd.drop, "cold-drop", "caches", "cold cells: before each, caches (drop_caches 3), pagecache (drop_caches 1), fadvise (POSIX_FADV_DONTNEED on the sets) or none")
	flag.IntVar(&cd.maxFiles, "cold-files", 0, "cold cells: cut each set to this many files (to try the driver)")
	flag.BoolVar(&cd.check, "throttle-check", true, "cold cells: stop unless a cold read in the cgroup is as slow as the caps say")
	flag.BoolVar(&r.strace, "strace", false, "count each measured run's system calls by name with strace -c -f into syscalls.md (make syscalls; slows the server several times)")
	flag.BoolVar(&r.smaps, "smaps", false, "read the server's resident memory by kind of mapping (/proc/PID/smaps) halfway through each measured run (rounds.csv's smaps_* columns)")
	flag.BoolVar(&r.memdump, "memdump", false, "with -smaps: SIGUSR2 to twinloop built with -tags memdump, its runtime/metrics memory classes into memdump/")
	note := flag.String("note", "", "a line for env.txt (what a setup script made: scripts/veth.sh's link)")
	ports := flag.String("ports", "21000-21099", "FIRST-LAST: the ports the servers (and a proxy cell's HAProxy) listen on")
	fit := flag.Bool("fit", false, "leave out the steps that need more CPUs than the machine has (scaling.steps), instead of refusing the run")
	flag.Parse()
	if *steps == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: labrun -steps FILE [flags] | labrun summarize DIR")
		flag.PrintDefaults()
		os.Exit(2)
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["rounds"] {
			r.rounds = 6
		}
		if !set["duration"] {
			r.duration = time.Second
		}
		if !set["warmup"] {
			r.warmup = 0
		}
	}
	r.stepsFile = *steps
	if a, b, ok := strings.Cut(*ports, "-"); ok {
		r.ports[0], _ = strconv.Atoi(a)
		r.ports[1], _ = strconv.Atoi(b)
	}
	if r.ports[0] < 1 || r.ports[1] < r.ports[0] || r.ports[1] > 65535 {
		fatal(fmt.Errorf("-ports wants FIRST-LAST, not %q", *ports))
	}
	if *bins != "" {
		for _, kv := range strings.Split(*bins, ",") {
			name, path, ok := strings.Cut(kv, "=")
			if !ok || name == "" || path == "" {
				fatal(fmt.Errorf("-bins wants NAME=PATH,..., not %q", kv))
			}
			if path, err := filepath.Abs(path); err == nil {
				r.bins["server@"+name] = path
			}
		}
	}
	f, err := os.Open(*steps)
	if err != nil {
		fatal(err)
	}
	r.plan, err = lab.ParseSteps(f)
	f.Close()
	if err != nil {
		fatal(fmt.Errorf("%s: %w", *steps, err))
	}
	r.planned = len(r.plan.Steps)
	if *only != "" {
		if r.plan, err = r.plan.Only(strings.Split(*only, ",")); err != nil {
			fatal(fmt.Errorf("-only: %w", err))
		}
	}
	if r.place, r.unfit = placeAll(r.plan, lab.OnlineCPUs(), r.wrkCPU); len(r.unfit) > 0 {
		if !*fit {
			fatal(fmt.Errorf("this machine cannot run %d of the steps:\n  %s\n(-fit leaves them out; -only runs a few, e.g. LABRUN_ARGS=-only=ID,ID)",
				len(r.unfit), strings.Join(r.unfit, "\n  ")))
		}
		var ids []string
		for _, s := range r.plan.Steps {
			if _, ok := r.place[s.ID]; ok {
				ids = append(ids, s.ID)
			}
		}
		if len(ids) == 0 {
			fatal(fmt.Errorf("no step fits this machine:\n  %s", strings.Join(r.unfit, "\n  ")))
		}
		if r.plan, err = r.plan.Only(ids); err != nil {
			fatal(err)
		}
	}
	if r.rounds == 0 {
		r.rounds = r.plan.Rounds
	}
	for _, s := range r.plan.Steps {
		if s.Cold != "" {
			if !slices.Contains([]string{"caches", "pagecache", "fadvise", "none"}, cd.drop) {
				fatal(fmt.Errorf("-cold-drop wants caches, pagecache, fadvise or none"))
			}
			r.cold = cd
			break
		}
	}
	if !set["duration"] && !*quick && r.plan.Duration > 0 {
		r.duration = r.plan.Duration
	}
	r.note = *note
	r.seed = *seed
	if !set["seed"] {
		r.seed = uint64(time.Now().UnixNano())
	}
	if *name == "" {
		*name = strings.TrimSuffix(filepath.Base(*steps), ".steps")
	}
	if *quick {
		*name += "_quick"
	}
	r.root, _ = os.Getwd()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := r.run(ctx, *name, *results, *bin, *quick); err != nil {
		fatal(err)
	}
}

// placeAll places the steps on this machine, and says why each that
// does not fit does not: the run is refused before its first cell unless
// -fit leaves them out.
func placeAll(p lab.Plan, online []int, wrkCPU string) (map[string]lab.Placement, []string) {
	place := map[string]lab.Placement{}
	var unfit []string
	for _, s := range p.Steps {
		pl, err := s.Place(online, wrkCPU)
		if err != nil {
			unfit = append(unfit, err.Error())
			continue
		}
		place[s.ID] = pl
	}
	return place, unfit
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "labrun: %v\n", err)
	os.Exit(1)
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

func (r *runner) run(ctx context.Context, name, results, bin string, quick bool) error {
	raiseNofile()
	var err error
	if r.work, err = os.MkdirTemp("", "twinloop-labrun."); err != nil {
		return err
	}
	defer os.RemoveAll(r.work)
	os.Chmod(r.work, 0o755) // nginx's workers run as nobody when the master is root
	r.docroot = filepath.Join(r.work, "www")
	if err := makeDocroot(r.docroot); err != nil {
		return err
	}
	if err := r.build(bin); err != nil {
		return err
	}
	if r.cgiDir, err = makeCGI(r.work); err != nil {
		return err
	}
	commit := "nocommit"
	if out, err := exec.Command("git", "-C", r.root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
	} else if b, err := os.ReadFile(filepath.Join(r.root, "COMMIT")); err == nil {
		commit = strings.TrimSpace(string(b)) // make lab-kit's, away from the repository
	}
	base := filepath.Join(results, time.Now().Format("2006-01-02")+"_"+commit+"_"+name)
	r.out = base
	for n := 2; exists(r.out); n++ {
		r.out = fmt.Sprintf("%s-%d", base, n)
	}
	if err := os.MkdirAll(r.out, 0o755); err != nil {
		return err
	}
	env, err := os.Create(filepath.Join(r.out, "env.txt"))
	if err != nil {
		return err
	}
	defer env.Close()
	if err := (lab.Env{Root: r.root}).Write(env, "start"); err != nil {
		return err
	}
	if len(r.plan.Steps) < r.planned {
		fmt.Fprintf(env, "only: %d of the file's %d steps (-only, -fit)\n", len(r.plan.Steps), r.planned)
	}
	for _, u := range r.unfit {
		fmt.Fprintf(env, "left out (-fit): %s\n", u)
	}
	fmt.Fprintf(env, "name: %s\nsteps: %s\nseed: %d\nrounds: %d\nduration: %s\nwarmup: %s\n",
		name, r.stepsFile, r.seed, r.rounds, r.duration, r.warmup)
	if quick {
		fmt.Fprintln(env, "quick: yes")
	}
	if r.plan.Evict {
		fmt.Fprintln(env, "evict: each cell's file dropped from the page cache (POSIX_FADV_DONTNEED) after its warm-up, before its measured run")
	}
	if r.quiet {
		fmt.Fprintf(env, "quiet gate: on (every CPU together under 5%% of one CPU over 0.5 s before each cell, up to %s)\n", r.quietMax)
	} else {
		fmt.Fprintln(env, "quiet gate: off (-quiet=false: a development run, not a result)")
	}
	var ids []string
	for _, s := range r.plan.Steps {
		ids = append(ids, s.ID)
	}
	fmt.Fprintf(env, "cells: %s\n", strings.Join(ids, " "))
	for _, c := range r.plan.Compares {
		fmt.Fprintf(env, "compare: %s %s\n", c[0], c[1])
	}
	fmt.Fprintf(env, "placement: each step's server on its CPUs (taskset), wrk -t1 on CPU %s, but a first:N step's client on the other CPUs, a thread each\n", r.wrkCPU)
	fmt.Fprintf(env, "online CPUs: %s\n", lab.FormatCPUList(lab.OnlineCPUs()))
	for _, k := range slices.Sorted(maps.Keys(r.bins)) {
		if name, ok := strings.CutPrefix(k, "server@"); ok {
			fmt.Fprintf(env, "binary @%s: %s\n", name, r.bins[k])
		}
	}
	for _, s := range r.plan.Steps {
		if pl := r.place[s.ID]; strings.HasPrefix(s.CPUs, "first:") {
			fmt.Fprintf(env, "placement %s: server on CPUs %s, wrk -t%d on CPUs %s\n", s.ID, pl.Server, pl.Threads, pl.Client)
		}
	}
	if out, err := exec.Command("wrk", "-v").CombinedOutput(); len(out) > 0 {
		_ = err // wrk -v exits 1
		fmt.Fprintf(env, "wrk: %s\n", strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]))
	}
	if out, err := exec.Command("nginx", "-v").CombinedOutput(); err == nil {
		fmt.Fprintf(env, "nginx: %s\n", strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: "))
	}
	if r.note != "" {
		fmt.Fprintf(env, "note: %s\n", r.note)
	}
	if r.plan.Netns[0] != "" {
		fmt.Fprintf(env, "network namespaces: server in %s, load generator in %s, server at %s\n", r.plan.Netns[0], r.plan.Netns[1], r.plan.Host)
	}
	if r.cold != nil {
		defer r.cold.close()
		if err := r.coldSetup(env); err != nil {
			return err
		}
	}
	cpu0, _ := lab.ReadCPUTimes()
	start := time.Now()

	cf, err := os.Create(filepath.Join(r.out, "rounds.csv"))
	if err != nil {
		return err
	}
	defer cf.Close()
	r.csv = csv.NewWriter(cf)
	r.csv.Write(lab.Rounds)
	r.csv.Flush()
	if slices.ContainsFunc(r.plan.Steps, func(s lab.Step) bool { return s.Rate > 0 }) {
		lf, err := os.Create(filepath.Join(r.out, "latency.csv"))
		if err != nil {
			return err
		}
		defer lf.Close()
		r.latency = csv.NewWriter(lf)
		r.latency.Write(lab.Latency)
	}

	cells := 0
	for round := 1; round <= r.rounds; round++ {
		cells += len(r.plan.Order(r.seed, round, r.rounds))
	}
	per := r.duration + r.warmup + 2*time.Second
	logf("%d cells in %d rounds (seed %d), about %s; results go to %s", cells, r.rounds, r.seed,
		(time.Duration(cells) * per).Round(time.Second), r.out)
	done := 0
	var runErr error
rounds:
	for round := 1; round <= r.rounds; round++ {
		order := r.plan.Order(r.seed, round, r.rounds)
		for slot, id := range order {
			if ctx.Err() != nil {
				runErr = ctx.Err()
				break rounds
			}
			row, summary, err := r.cell(ctx, *r.plan.Step(id), round, slot+1)
			done++
			if err != nil {
				logf("round %d/%d slot %d/%d %s: %v", round, r.rounds, slot+1, len(order), id, err)
				if ctx.Err() != nil {
					runErr = ctx.Err()
					break rounds
				}
				continue
			}
			r.rows = append(r.rows, row)
			r.csv.Write(row)
			r.csv.Flush()
			logf("[%d/%d] round %d/%d slot %d/%d %s: %s", done, cells, round, r.rounds, slot+1, len(order), id, summary)
		}
	}
	(lab.Env{}).WriteLoad(env, "end")
	if cpu1, err := lab.ReadCPUTimes(); err == nil && cpu0 != nil {
		d := cpu1.Since(cpu0)
		if d.Sum() > 0 {
			fmt.Fprintf(env, "steal over the run: %.2f%% of CPU time\n", 100*float64(d.Steal)/float64(d.Sum()))
		}
	}
	fmt.Fprintf(env, "elapsed: %s\n", time.Since(start).Round(time.Second))
	if runErr != nil {
		fmt.Fprintf(env, "status: incomplete: stopped early (%v) at %s\n", runErr, time.Now().Format(time.RFC3339))
	}
	env.Close()
	if len(r.rows) == 0 {
		return fmt.Errorf("no cell measured; see the log above (%s)", r.out)
	}
	run, err := lab.ReadRun(r.out)
	if err != nil {
		return err
	}
	bf, err := os.Create(filepath.Join(r.out, "bench.txt"))
	if err != nil {
		return err
	}
	if err := run.WriteBench(bf); err != nil {
		return err
	}
	bf.Close()
	if err := os.WriteFile(filepath.Join(r.out, "summary.md"), run.Summary(), 0o644); err != nil {
		return err
	}
	// The plot is scripts/plot's (gonum), as make study redraws it.
	plot := exec.Command("go", "run", "./scripts/plot", "-labrun", "-dir", r.out)
	plot.Dir = r.root
	plot.Env = goEnv()
	plot.Stdout, plot.Stderr = os.Stderr, os.Stderr
	if err := plot.Run(); err != nil {
		logf("plot -labrun failed (%v): summary.md is written, intervals.png is not", err)
	}
	logf("done in %s: %s", time.Since(start).Round(time.Second), r.out)
	return runErr
}

// cell runs step s once: fresh server, warm-up, quiet gate, measured
// run. It returns rounds.csv's row and a progress line.
func (r *runner) cell(ctx context.Context, s lab.Step, round, slot int) ([]string, string, error) {
	if s.Cold != "" {
		return r.coldCell(ctx, s, round, slot)
	}
	if s.Mode == "cgi-beside" {
		return r.cgiCell(ctx, s, round, slot)
	}
	if s.Proxy != nil {
		return r.proxyCell(ctx, s, round, slot)
	}
	path, _ := lab.URLPath(s.Size)
	sv, err := r.startServer(s)
	if err != nil {
		return nil, "", err
	}
	defer sv.stop()
	if r.warmup > 0 {
		if _, _, _, err := r.wrk(ctx, s, sv.port, path, r.warmup); err != nil {
			return nil, "", fmt.Errorf("warm-up: %w", err)
		}
	}
	quiesce(sv.pids)
	var waited time.Duration
	if r.quiet {
		waited = quietWait(ctx, r.quietMax)
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		if waited > time.Second {
			logf("waited %.1f s for a quiet machine", waited.Seconds())
		}
	}
	if r.plan.Evict {
		if err := evictPage(r.docroot, path); err != nil {
			return nil, "", fmt.Errorf("evicting %s: %w", path, err)
		}
	}
	var straceStop func() map[string]int64
	if r.strace {
		if straceStop, err = straceAttach(sv.pids, filepath.Join(r.work, fmt.Sprintf("strace-%s-%d.txt", s.ID, round))); err != nil {
			return nil, "", err
		}
	}
	m, err := startMeter(sv.pids)
	if err != nil {
		return nil, "", err
	}
	var mid func() []string
	if r.smaps {
		mid = r.midRun(sv, s.Kind == "epoll" || s.Kind == "uring" || s.Kind == "blocking", r.duration, fmt.Sprintf("%s-r%d", s.ID, round))
	}
	rep, client, extra, err := r.wrk(ctx, s, sv.port, path, r.duration)
	if mid != nil {
		extra = append(extra, mid()...)
	}
	if err != nil {
		if straceStop != nil {
			straceStop()
		}
		return nil, "", err
	}
	var straced map[string]int64
	if straceStop != nil {
		straced = straceStop()
	}
	if s.Rate > 0 {
		if err := r.keepHist(s, round); err != nil {
			return nil, "", err
		}
	}
	quiesce(sv.pids)
	set, err := m.stop(rep.Requests, client)
	if err != nil {
		return nil, "", err
	}
	rss := peakRSSKB(sv.pids)
	sv.stop()
	if r.strace {
		if err := r.writeStraceTable(fmt.Sprintf("%s (%s), round %d", s.ID, s.Label, round), rep.Requests, straced, exitCounters(sv.log)); err != nil {
			return nil, "", err
		}
	}
	set = append(set, "step="+s.ID, "label="+s.Label, "kind="+s.Kind, fmt.Sprintf("conns=%d", s.Conns),
		"mode="+s.Mode, "size="+s.Size, fmt.Sprintf("round=%d", round), fmt.Sprintf("slot=%d", slot),
		fmt.Sprintf("seed=%d", r.seed), fmt.Sprintf("peak_rss_kb=%d", rss),
		fmt.Sprintf("duration_s=%g", r.duration.Seconds()), "syscalls_per_req="+sv.syscallsPerReq())
	set = append(set, extra...)
	if r.quiet {
		set = append(set, fmt.Sprintf("quiet_wait_s=%.1f", waited.Seconds()))
	}
	row, err := lab.Row(lab.Rounds, &rep, set)
	if err != nil {
		return nil, "", err
	}
	get := func(c string) string {
		for i, n := range lab.Rounds {
			if n == c {
				return row[i]
			}
		}
		return ""
	}
	return row, fmt.Sprintf("%.0f req/s, CPU-µs/req %s machine, %s server; %s syscalls/req",
		rep.RPS, get("machine_cpu_us_per_req"), get("cpu_us_per_req"), orDash(get("syscalls_per_req"))), nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// wrk runs the step's load pinned to its client CPUs against the server
// and returns its report, its CPU time (utime + stime, from its rusage)
// and rounds.csv's columns only a fixed-rate cell has: wrk, a thread per
// client CPU, or for a rate:N step scripts/loadgen at N req/s, open loop
// (its latencies from each request's intended send time).
func (r *runner) wrk(ctx context.Context, s lab.Step, port int, path string, d time.Duration) (lab.Report, time.Duration, []string, error) {
	pl := r.place[s.ID]
	url := fmt.Sprintf("http://%s:%d%s", r.plan.Host, port, path)
	var args []string
	if s.Rate > 0 {
		args = []string{"-c", pl.Client, r.bins["loadgen"], "-addr", fmt.Sprintf("%s:%d", r.plan.Host, port), "-path", path,
			"-rate", strconv.Itoa(s.Rate), "-c", strconv.Itoa(s.Conns), "-d", d.String(), "-drain", "1s",
			"-hist", r.histFile(s)}
	} else {
		secs := int(math.Max(1, math.Round(d.Seconds()))) // wrk takes whole seconds
		args = []string{"-c", pl.Client, "wrk", fmt.Sprintf("-t%d", pl.Threads), fmt.Sprintf("-c%d", s.Conns),
			fmt.Sprintf("-d%ds", secs), "--timeout", "10s", "--latency"}
		switch s.Mode {
		case "close":
			args = append(args, "-H", "Connection: close")
		case "pipeline16":
			args = append(args, "-s", filepath.Join(r.root, "scripts", "pipeline.lua"))
		}
		args = append(args, url)
		if s.Mode == "pipeline16" {
			args = append(args, "--", "16", path)
		}
	}
	cmd := r.clientCmd(ctx, args)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return lab.Report{}, 0, nil, fmt.Errorf("%s: %v: %s", args[2], err, strings.TrimSpace(string(out)))
	}
	var rep lab.Report
	var extra []string
	if s.Rate > 0 {
		var unsent int64
		rep, unsent, err = lab.ParseLoadgen(strings.NewReader(string(out)))
		extra = []string{fmt.Sprintf("rate_offered=%d", s.Rate), fmt.Sprintf("unsent=%d", unsent)}
	} else {
		rep, err = lab.ParseWrk(strings.NewReader(string(out)))
	}
	if err != nil {
		return lab.Report{}, 0, nil, fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return rep, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), extra, nil
}

// histFile is where a rate:N step's loadgen writes its latency histogram,
// each run over the last: the measured run's is the one cell keeps.
func (r *runner) histFile(s lab.Step) string {
	return filepath.Join(r.work, "hist-"+s.ID+".csv")
}

// keepHist appends the measured run's latency histogram of a rate:N
// cell to the run's latency.csv (lab.Latency), a row per non-empty
// bucket.
func (r *runner) keepHist(s lab.Step, round int) error {
	f, err := os.Open(r.histFile(s))
	if err != nil {
		return err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) == 0 || !slices.Equal(recs[0], []string{"upper_ns", "count"}) {
		return fmt.Errorf("%s: not loadgen's histogram (%v)", f.Name(), err)
	}
	for _, rec := range recs[1:] {
		r.latency.Write([]string{s.ID, strconv.Itoa(round), rec[0], rec[1]})
	}
	r.latency.Flush()
	return r.latency.Error()
}

// clientCmd is the load generator's command: taskset args, inside the
// plan's client namespace if it has one (ip netns exec, which execs).
func (r *runner) clientCmd(ctx context.Context, args []string) *exec.Cmd {
	if ns := r.plan.Netns[1]; ns != "" {
		return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, "taskset"}, args...)...)
	}
	return exec.CommandContext(ctx, "taskset", args...)
}

// build builds the binaries the plan's steps need into the work folder,
// static as make build links the server (CGO_ENABLED=0).
func (r *runner) build(bin string) error {
	need := map[string]bool{}
	for _, s := range r.plan.Steps {
		if s.Rate > 0 {
			need["loadgen"] = true
		}
		if s.Proxy != nil {
			if _, err := exec.LookPath("haproxy"); err != nil {
				return fmt.Errorf("step %s needs haproxy, which is not installed (apt-get install haproxy)", s.ID)
			}
		}
		switch s.Kind {
		case "epoll", "uring", "poll", "blocking":
			if s.Bin == "" {
				need["server"] = true
			} else if r.bins["server@"+s.Bin] == "" {
				return fmt.Errorf("step %s runs binary @%s, which -bins does not name (-bins %s=PATH)", s.ID, s.Bin, s.Bin)
			}
		case "gnet", "fasthttp":
			need["peers"] = true
		case "gohttp":
			need["gohttp"] = true
		case "nginx":
			if _, err := exec.LookPath("nginx"); err != nil {
				return fmt.Errorf("a step needs nginx, which is not installed (make headline installs it)")
			}
		}
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		return fmt.Errorf("wrk is not installed (make headline installs it)")
	}
	if bin != "" && need["server"] {
		r.bins["server"] = bin
		delete(need, "server")
	}
	if r.loadgen != "" && need["loadgen"] {
		r.bins["loadgen"] = r.loadgen
		delete(need, "loadgen")
	}
	targets := map[string][2]string{ // dir, package
		"server":  {r.root, "./cmd/server"},
		"peers":   {filepath.Join(r.root, "scripts", "peers"), "."},
		"gohttp":  {r.root, "./scripts/gohttp"},
		"loadgen": {r.root, "./scripts/loadgen"},
	}
	for _, k := range []string{"server", "peers", "gohttp", "loadgen"} {
		if !need[k] {
			continue
		}
		out := filepath.Join(r.work, k)
		logf("building %s", targets[k][1])
		cmd := exec.Command("go", "build", "-o", out, targets[k][1])
		cmd.Dir = targets[k][0]
		cmd.Env = goEnv()
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build %s: %w", targets[k][1], err)
		}
		r.bins[k] = out
	}
	return nil
}

// goEnv is the environment of the go commands the driver runs: binaries
// linked static, as make build links the server (CGO_ENABLED=0), and
// -checklinkname=0, without which giouring does not link (README), unless
// the caller set GOFLAGS.
func goEnv() []string {
	env := append(os.Environ(), "CGO_ENABLED=0")
	if os.Getenv("GOFLAGS") == "" {
		env = append(env, "GOFLAGS=-ldflags=-checklinkname=0")
	}
	return env
}

// raiseNofile lifts the descriptor limit (inherited by wrk and the
// servers) as far as allowed: c=1000 needs more than the usual 1024.
func raiseNofile() {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return
	}
	want := uint64(65536)
	if lim.Max < want {
		lim.Max = want // root may raise the hard limit
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: want}) == nil {
			return
		}
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
		want = lim.Max
	}
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: lim.Max})
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
