package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/scripts/lab"
)

// cold is what a run with cold:SET steps adds (make cold, issue 18): the
// cold sets under -cold-dir, the cgroup that throttles the server's reads
// of their disk, and cold.csv (lab.Cold, as scripts/cold.sh wrote it, for
// scripts/plot -cold).
type cold struct {
	dir       string // -cold-dir; the docroot is dir/www
	iops, bps int64  // the throttle; 0 and 0: no cgroup (development only)
	drop      string // caches, pagecache, fadvise or none
	maxFiles  int    // -cold-files: each set cut to this many (development)
	check     bool   // verify the throttle before the cells
	dev       string // MAJ:MIN the throttle names
	cg        string // the cgroup's folder, "" without one
	procs     string // its cgroup.procs
	setting   string // what the cgroup says it caps
	programs  []string
	csv       *csv.Writer
	csvFile   *os.File
}

func (c *cold) sets(p lab.Plan) map[string]lab.ColdSet {
	out := map[string]lab.ColdSet{}
	for name, s := range p.ColdSets {
		if c.maxFiles > 0 && s.Files > c.maxFiles {
			s.Files = c.maxFiles
		}
		out[name] = s
	}
	return out
}

// setup makes (or reuses) the sets, the cgroup and cold.csv, and checks
// the throttle holds; env gets what it did.
func (r *runner) coldSetup(env io.Writer) error {
	c := r.cold
	if os.Geteuid() != 0 && (c.drop == "caches" || c.drop == "pagecache" || c.iops > 0 || c.bps > 0) {
		return fmt.Errorf("cold cells drop the page cache and make a cgroup: run as root (or -cold-drop=fadvise -throttle-iops=0 -throttle-bps=0 to try the driver)")
	}
	www := filepath.Join(c.dir, "www")
	if err := makeDocroot(www); err != nil {
		return err
	}
	os.Chmod(c.dir, 0o755)
	r.docroot = www
	for name, s := range c.sets(r.plan) {
		if err := makeColdSet(filepath.Join(www, name), s); err != nil {
			return fmt.Errorf("cold set %s: %w", name, err)
		}
	}
	c.programs = programs(r.bins)
	var err error
	if c.dev, err = blockDevice(c.dir); err != nil && (c.iops > 0 || c.bps > 0) {
		return err
	}
	if c.iops > 0 || c.bps > 0 {
		if err := c.makeCgroup(); err != nil {
			return err
		}
	}
	fmt.Fprintf(env, "cold sets: %s (block device %s)", c.dir, c.dev)
	for name, s := range c.sets(r.plan) {
		fmt.Fprintf(env, ", %s %d x %d B", name, s.Files, s.Bytes)
	}
	fmt.Fprintln(env)
	if c.cg != "" {
		fmt.Fprintf(env, "throttle: %s\n", c.setting)
	} else {
		fmt.Fprintln(env, "throttle: none (-throttle-iops=0 -throttle-bps=0: a development run, not a result)")
	}
	fmt.Fprintf(env, "cold cells: drop before each (%s); the server moved into the cgroup once it listens; %d clients on the cached page beside each cold cell's step connections (scripts/cold.lua), at once\n", c.drop, r.plan.Hot)
	if c.cg != "" && c.check {
		if err := r.verifyThrottle(); err != nil {
			return err
		}
	}
	f, err := os.Create(filepath.Join(r.out, "cold.csv"))
	if err != nil {
		return err
	}
	c.csvFile, c.csv = f, csv.NewWriter(f)
	c.csv.Write(lab.Cold)
	c.csv.Flush()
	return nil
}

func (c *cold) close() {
	if c == nil {
		return
	}
	if c.csvFile != nil {
		c.csvFile.Close()
	}
	if c.cg != "" {
		// Its processes are gone (each cell's server is stopped).
		for i := 0; i < 20 && os.Remove(c.cg) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// makeColdSet writes s's files of random bytes as dir/00000, dir/00001,
// ... (cold.lua's names), once: dir/.complete records the set it holds,
// so that an interrupted or different set is made again.
func makeColdSet(dir string, s lab.ColdSet) error {
	mark := filepath.Join(dir, ".complete")
	want := fmt.Sprintf("%d %d\n", s.Files, s.Bytes)
	if b, err := os.ReadFile(mark); err == nil && string(b) == want {
		return nil
	}
	logf("cold set %s: writing %d files of %d bytes", dir, s.Files, s.Bytes)
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rng := rand.NewChaCha8([32]byte{byte(s.Files), byte(s.Bytes)})
	buf := make([]byte, 1<<20)
	for i := 0; i < s.Files; i++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%05d", i)), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		for left := s.Bytes; left > 0; {
			n := min(left, int64(len(buf)))
			rng.Read(buf[:n])
			if _, err := f.Write(buf[:n]); err != nil {
				f.Close()
				return err
			}
			left -= n
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	unix.Sync()
	return os.WriteFile(mark, []byte(want), 0o644)
}

// blockDevice is the MAJ:MIN the throttle names for reads of dir's
// files: the whole disk for a partition. tmpfs, overlay and the like
// have none.
func blockDevice(dir string) (string, error) {
	out, err := exec.Command("findmnt", "-no", "MAJ:MIN,FSTYPE,SOURCE", "-T", dir).Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) < 3 {
		return "", fmt.Errorf("findmnt -T %s: %v", dir, err)
	}
	mm := f[0]
	if _, err := os.Stat("/sys/dev/block/" + mm); err != nil {
		return "", fmt.Errorf("%s is on %s (%s, %s), not a block device: -cold-dir must be on a disk", dir, f[2], f[1], mm)
	}
	if _, err := os.Stat("/sys/dev/block/" + mm + "/partition"); err == nil {
		b, err := os.ReadFile("/sys/dev/block/" + mm + "/../dev")
		if err != nil {
			return "", err
		}
		mm = strings.TrimSpace(string(b))
	}
	return mm, nil
}

// makeCgroup makes the cgroup capping reads from c.dev: cgroup v1's
// blkio throttle, or v2's io.max.
func (c *cold) makeCgroup() error {
	v1, v2 := "/sys/fs/cgroup/blkio", "/sys/fs/cgroup"
	write := func(file, s string) error { return os.WriteFile(filepath.Join(c.cg, file), []byte(s), 0o644) }
	read := func(file string) string {
		b, _ := os.ReadFile(filepath.Join(c.cg, file))
		return strings.TrimSpace(string(b))
	}
	name := fmt.Sprintf("twinloop-cold-%d", os.Getpid())
	if _, err := os.Stat(filepath.Join(v1, "blkio.throttle.read_iops_device")); err == nil {
		c.cg = filepath.Join(v1, name)
		if err := os.Mkdir(c.cg, 0o755); err != nil {
			c.cg = ""
			return err
		}
		if c.iops > 0 {
			if err := write("blkio.throttle.read_iops_device", fmt.Sprintf("%s %d", c.dev, c.iops)); err != nil {
				return err
			}
		}
		if c.bps > 0 {
			if err := write("blkio.throttle.read_bps_device", fmt.Sprintf("%s %d", c.dev, c.bps)); err != nil {
				return err
			}
		}
		c.setting = fmt.Sprintf("cgroup v1 blkio on %s: read_iops_device %s; read_bps_device %s",
			c.dev, read("blkio.throttle.read_iops_device"), read("blkio.throttle.read_bps_device"))
	} else if b, _ := os.ReadFile(filepath.Join(v2, "cgroup.controllers")); strings.Contains(" "+string(b), " io") {
		if sub, _ := os.ReadFile(filepath.Join(v2, "cgroup.subtree_control")); !strings.Contains(" "+string(sub), " io") {
			if err := os.WriteFile(filepath.Join(v2, "cgroup.subtree_control"), []byte("+io"), 0o644); err != nil {
				return fmt.Errorf("enabling the io controller: %w", err)
			}
		}
		c.cg = filepath.Join(v2, name)
		if err := os.Mkdir(c.cg, 0o755); err != nil {
			c.cg = ""
			return err
		}
		lim := c.dev
		if c.iops > 0 {
			lim += fmt.Sprintf(" riops=%d", c.iops)
		}
		if c.bps > 0 {
			lim += fmt.Sprintf(" rbps=%d", c.bps)
		}
		if err := write("io.max", lim); err != nil {
			return err
		}
		c.setting = "cgroup v2 io.max " + read("io.max")
	} else {
		return fmt.Errorf("no blkio (cgroup v1) or io (cgroup v2) controller: cannot throttle the disk")
	}
	c.procs = filepath.Join(c.cg, "cgroup.procs")
	return nil
}

// dropCache empties the page cache of the sets' files before a cell:
// drop_caches (caches: 3, the directories' and inodes' too, as cold.sh
// did; pagecache: 1, the data only, as cold-readahead.sh's DROP=1), or
// POSIX_FADV_DONTNEED on each file of the sets (the data only; leaves
// the rest of a shared machine's cache alone).
func (r *runner) dropCache() error {
	switch r.cold.drop {
	case "caches", "pagecache":
		unix.Sync()
		return os.WriteFile("/proc/sys/vm/drop_caches", []byte(map[string]string{"caches": "3", "pagecache": "1"}[r.cold.drop]), 0o644)
	case "fadvise":
		for name, s := range r.cold.sets(r.plan) {
			for i := 0; i < s.Files; i++ {
				f, err := os.Open(filepath.Join(r.docroot, name, fmt.Sprintf("%05d", i)))
				if err != nil {
					return err
				}
				unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
				f.Close()
			}
		}
	}
	return nil
}

// evictPage drops the docroot's file that path asks (lab.URLPath; "/" is
// index.html) from the page cache: synced first, since a dirty page
// stays through POSIX_FADV_DONTNEED. A plan's evict line, before each
// cell's measured run.
func evictPage(docroot, path string) error {
	name := strings.TrimPrefix(path, "/")
	if name == "" {
		name = "index.html"
	}
	f, err := os.Open(filepath.Join(docroot, name))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	return os.NewSyscallError("fadvise", unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
}

// programs are the servers' binaries and the libraries nginx links: read
// back into the cache after a drop, outside the cgroup, so that a page of
// their text faulted in while throttled is not a read the set did not ask.
func programs(bins map[string]string) []string {
	var out []string
	for _, b := range bins {
		out = append(out, b)
	}
	if ng, err := exec.LookPath("nginx"); err == nil {
		out = append(out, ng)
		ldd, _ := exec.Command("ldd", ng).Output()
		for _, l := range strings.Split(string(ldd), "\n") {
			for _, f := range strings.Fields(l) {
				if strings.HasPrefix(f, "/") {
					out = append(out, f)
				}
			}
		}
	}
	return out
}

func readAll(paths []string) {
	for _, p := range paths {
		if f, err := os.Open(p); err == nil {
			io.Copy(io.Discard, f)
			f.Close()
		}
	}
}

// inCgroup runs argv inside the cgroup (sh writes its own pid, then
// execs), returning how long it took.
func (c *cold) timed(inside bool, argv ...string) (time.Duration, error) {
	if inside {
		argv = append([]string{"sh", "-c", `echo $$ >"$0" && exec "$@"`, c.procs}, argv...)
	}
	t0 := time.Now()
	err := exec.Command(argv[0], argv[1:]...).Run()
	return time.Since(t0), err
}

// verifyThrottle reads, for each set, its last files cold (up to 64 MiB
// and 300 files) outside the cgroup and inside it; inside, it must take at
// least 90% of what the caps allow, else the run stops (throttle.txt).
func (r *runner) verifyThrottle() error {
	c := r.cold
	var b strings.Builder
	fmt.Fprintf(&b, "throttle: %s\n", c.setting)
	ok := true
	for name, s := range c.sets(r.plan) {
		k := int(min(int64(s.Files), 300, max(1, (64<<20)/s.Bytes)))
		files := []string{"cat"}
		for i := s.Files - k; i < s.Files; i++ {
			files = append(files, filepath.Join(r.docroot, name, fmt.Sprintf("%05d", i)))
		}
		var out, in time.Duration
		var err error
		if err = r.dropCache(); err == nil {
			out, err = c.timed(false, files...)
		}
		if err == nil {
			if err = r.dropCache(); err == nil {
				in, err = c.timed(true, files...)
			}
		}
		if err != nil {
			return fmt.Errorf("verifying the throttle: %w", err)
		}
		var want float64
		if c.bps > 0 {
			want = float64(int64(k)*s.Bytes) / float64(c.bps)
		}
		if c.iops > 0 {
			want = max(want, float64(k)/float64(c.iops))
		}
		want *= 0.9
		fmt.Fprintf(&b, "cold read of %d x %d B (%s): %.3fs unthrottled, %.3fs in the cgroup (at least %.3fs expected)\n",
			k, s.Bytes, name, out.Seconds(), in.Seconds(), want)
		ok = ok && in.Seconds() >= want
	}
	if ok {
		b.WriteString("verdict: the throttle holds\n")
	} else {
		b.WriteString("verdict: the throttle does not hold\n")
	}
	os.WriteFile(filepath.Join(r.out, "throttle.txt"), []byte(b.String()), 0o644)
	logf("%s", strings.TrimSpace(b.String()))
	if !ok {
		return fmt.Errorf("the throttle does not hold (throttle.txt): is %s the device under %s?", c.dev, c.dir)
	}
	return nil
}

// coldCell runs cold step s once: drop the sets from the cache, a fresh
// server moved into the cgroup, the cached page warmed (3 requests), the
// quiet gate, then at once for the run's duration, both on the step's
// client CPUs: wrk -c<step's connections> -s cold.lua on the set's files
// in a random order without repeats, and wrk -c<hot> on the size's
// cached page. rounds.csv's row: the cached page's latency and req/s,
// the set's MB/s and files/s, the CPU per request of both loads.
func (r *runner) coldCell(ctx context.Context, s lab.Step, round, slot int) ([]string, string, error) {
	c := r.cold
	set := c.sets(r.plan)[s.Cold]
	path, _ := lab.URLPath(s.Size)
	if err := r.dropCache(); err != nil {
		return nil, "", fmt.Errorf("dropping the cache: %w", err)
	}
	readAll(c.programs)
	sv, err := r.startServer(s)
	if err != nil {
		return nil, "", err
	}
	defer sv.stop()
	if c.procs != "" {
		for _, p := range sv.pids {
			if err := os.WriteFile(c.procs, []byte(strconv.Itoa(p)), 0o644); err != nil {
				return nil, "", fmt.Errorf("moving pid %d into %s: %w", p, c.cg, err)
			}
		}
	}
	url := fmt.Sprintf("http://%s:%d", r.plan.Host, sv.port)
	if r.plan.Netns[1] == "" {
		for i := 0; i < 3; i++ {
			resp, err := http.Get(url + path)
			if err != nil {
				return nil, "", fmt.Errorf("the cached page does not answer: %w", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	quiesce(sv.pids)
	var waited time.Duration
	if r.quiet {
		waited = quietWait(ctx, r.quietMax)
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
	}
	secs := fmt.Sprintf("-d%ds", max(1, int(r.duration.Seconds()+0.5)))
	pl := r.place[s.ID]
	hotArgs := []string{"-c", pl.Client, "wrk", "-t1", fmt.Sprintf("-c%d", r.plan.Hot), secs, "--timeout", "10s", "--latency", url + path}
	coldArgs := []string{"-c", pl.Client, "wrk", "-t1", fmt.Sprintf("-c%d", s.Conns), secs, "--timeout", "30s",
		"-s", filepath.Join(r.root, "scripts", "cold.lua"), url + "/", "--", "/" + s.Cold + "/", strconv.Itoa(set.Files),
		strconv.FormatUint(r.seed%1e9+uint64(round*100+slot), 10)}
	m, err := startMeter(sv.pids)
	if err != nil {
		return nil, "", err
	}
	var wg sync.WaitGroup
	var outs [2][]byte
	var errs [2]error
	var cpu [2]time.Duration
	for i, a := range [][]string{hotArgs, coldArgs} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := r.clientCmd(ctx, a)
			outs[i], errs[i] = cmd.CombinedOutput()
			if cmd.ProcessState != nil {
				cpu[i] = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
		}()
	}
	wg.Wait()
	for i, e := range errs {
		if e != nil {
			return nil, "", fmt.Errorf("wrk (%s): %v: %s", []string{"hot", "cold"}[i], e, strings.TrimSpace(string(outs[i])))
		}
	}
	quiesce(sv.pids)
	hot, err := lab.ParseWrk(strings.NewReader(string(outs[0])))
	if err != nil {
		return nil, "", fmt.Errorf("hot wrk: %v", err)
	}
	cl, err := parseColdLine(outs[1])
	if err != nil {
		return nil, "", err
	}
	reqs := hot.Requests + int64(cl["requests"])
	meters, err := m.stop(reqs, cpu[0]+cpu[1])
	if err != nil {
		return nil, "", err
	}
	cpuS := float64(procTicks(sv.pids)-m.ticks) / clkTck
	rss := peakRSSKB(sv.pids)
	sv.stop()
	mbps := cl["bytes"] / cl["seconds"] / 1e6
	fps := cl["requests"] / cl["seconds"]
	hotRPS := hot.RPS
	vals := append(meters, "step="+s.ID, "label="+s.Label, "kind="+s.Kind, fmt.Sprintf("conns=%d", s.Conns),
		"mode="+s.Mode, "size="+s.Size, fmt.Sprintf("round=%d", round), fmt.Sprintf("slot=%d", slot),
		fmt.Sprintf("seed=%d", r.seed), fmt.Sprintf("peak_rss_kb=%d", rss), fmt.Sprintf("requests=%d", reqs),
		fmt.Sprintf("duration_s=%g", r.duration.Seconds()), "syscalls_per_req="+sv.syscallsPerReq(),
		"set="+s.Cold, fmt.Sprintf("cold_MBps=%.1f", mbps), fmt.Sprintf("cold_files_per_s=%.1f", fps),
		fmt.Sprintf("cold_errors=%.0f", cl["errors"]), fmt.Sprintf("cold_non2xx=%.0f", cl["status"]),
		fmt.Sprintf("cpu_s=%.2f", cpuS))
	if r.quiet {
		vals = append(vals, fmt.Sprintf("quiet_wait_s=%.1f", waited.Seconds()))
	}
	row, err := lab.Row(lab.Rounds, &hot, vals)
	if err != nil {
		return nil, "", err
	}
	// cold.csv: scripts/cold.sh's row, for scripts/plot -cold.
	field := func(name string) string { v, _ := hot.Field(name); return v }
	ms := func(us string) string {
		v, err := strconv.ParseFloat(us, 64)
		if err != nil {
			return ""
		}
		return fmt.Sprintf("%.2f", v/1000)
	}
	get := func(col string) string {
		for i, n := range lab.Rounds {
			if n == col {
				return row[i]
			}
		}
		return ""
	}
	crow, err := lab.Row(lab.Cold, nil, []string{"server=" + strings.TrimSuffix(s.ID, "-"+s.Cold), "set=" + s.Cold,
		fmt.Sprintf("round=%d", round), "hot_p99_ms=" + ms(field("p99_us")), "hot_rps=" + field("rps"),
		fmt.Sprintf("cold_MBps=%.1f", mbps), fmt.Sprintf("cold_files_per_s=%.1f", fps), fmt.Sprintf("cpu_s=%.2f", cpuS),
		fmt.Sprintf("cpu_us_per_req=%.1f", cpuS*1e6/float64(max(reqs, 1))), "hot_p50_ms=" + ms(field("p50_us")),
		"hot_errors=" + field("errors"), "hot_non2xx=" + field("non2xx"),
		fmt.Sprintf("cold_errors=%.0f", cl["errors"]), fmt.Sprintf("cold_non2xx=%.0f", cl["status"]),
		"machine_cpu_us_per_req=" + get("machine_cpu_us_per_req"), "softirq_us_per_req=" + get("softirq_us_per_req"),
		"client_cpu_us_per_req=" + get("client_cpu_us_per_req")})
	if err != nil {
		return nil, "", err
	}
	c.csv.Write(crow)
	c.csv.Flush()
	return row, fmt.Sprintf("cached page %.0f req/s, p99 %s ms; cold %.1f MB/s, %.1f files/s; server CPU %.2f s, CPU-µs/req %s machine",
		hotRPS, ms(field("p99_us")), mbps, fps, cpuS, get("machine_cpu_us_per_req")), nil
}

// parseColdLine reads cold.lua's "cold: requests=R bytes=B seconds=S
// errors=E status=N".
func parseColdLine(out []byte) (map[string]float64, error) {
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "cold: ")
		if !ok {
			continue
		}
		m := map[string]float64{}
		for _, kv := range strings.Fields(rest) {
			k, v, _ := strings.Cut(kv, "=")
			m[k], _ = strconv.ParseFloat(v, 64)
		}
		if m["seconds"] <= 0 {
			break
		}
		return m, nil
	}
	return nil, fmt.Errorf("cold wrk printed no cold: line: %s", strings.TrimSpace(string(out)))
}
