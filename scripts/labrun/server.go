package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/scripts/lab"
)

// server is one server under test, started for one cell and stopped
// after it.
type server struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd.Wait returned
	port    int
	host    string // where it listens
	netns   string // its network namespace, or ""
	log     string // its stderr
	memdump string // its TWINLOOP_MEMDUMP folder (-memdump), or "" (twinloop's counters) and stdout
	pids    []int  // whose CPU time counts: nginx's master and workers
}

// startServer starts step s pinned to its CPUs (taskset, as lib.sh
// start_server does) on the next free port and waits until it accepts
// connections. Its stdout and stderr go to a file in the run's work
// folder: twinloop's -v access log with them, as nginx's access_log goes
// to a file in its own.
func (r *runner) startServer(s lab.Step) (*server, error) {
	port, err := r.nextPort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("%s:%d", r.plan.Host, port)
	var args, env []string
	switch s.Kind {
	case "epoll", "uring", "poll", "blocking":
		bin := r.bins["server"]
		if s.Bin != "" {
			bin = r.bins["server@"+s.Bin]
		}
		args = []string{bin, "--backend=" + s.Kind, "--loops", strconv.Itoa(s.Loops), "--listen", addr, "--dir", r.docroot}
		if s.Size == "cgi" {
			args = append(args, "--cgi-dir", r.cgiDir)
		}
		for _, f := range s.Flags {
			if kv, ok := strings.CutPrefix(f, "env:"); ok {
				env = append(env, kv) // GOGC=1 and the like, the server's environment
			} else {
				args = append(args, f)
			}
		}
	case "gnet", "fasthttp":
		args = []string{r.bins["peers"], "-server", s.Kind, "-loops", strconv.Itoa(s.Loops), "-listen", addr, "-dir", r.docroot}
	case "gohttp":
		args = []string{r.bins["gohttp"], "-listen", addr, "-dir", r.docroot}
	case "nginx":
		dir := filepath.Join(r.work, fmt.Sprintf("nginx-%d", port))
		conf, err := nginxConf(dir, s.Loops, r.plan.Host, port, r.docroot, slices.Contains(s.Flags, "access_log"), slices.Contains(s.Flags, "aio_threads"))
		if err != nil {
			return nil, err
		}
		args = []string{"nginx", "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log")}
	default:
		return nil, fmt.Errorf("unknown kind %s", s.Kind)
	}
	logPath := filepath.Join(r.work, fmt.Sprintf("%s-%d.log", s.ID, port))
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args = append([]string{"taskset", "-c", r.place[s.ID].Server}, args...)
	if ns := r.plan.Netns[0]; ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...) // ip execs: the pid is the server's
	}
	cmd := exec.Command(args[0], args[1:]...)
	var memdump string
	if r.memdump && (s.Kind == "epoll" || s.Kind == "uring" || s.Kind == "blocking") {
		memdump = filepath.Join(r.work, fmt.Sprintf("memdump-%s-%d", s.ID, port))
		os.MkdirAll(memdump, 0o755)
		env = append(env, "TWINLOOP_MEMDUMP="+memdump)
	}
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sv := &server{cmd: cmd, done: make(chan struct{}), host: r.plan.Host, netns: r.plan.Netns[0], memdump: memdump, port: port, log: logPath, pids: []int{cmd.Process.Pid}}
	go func() { cmd.Wait(); close(sv.done) }()
	if !sv.waitListening(10 * time.Second) {
		sv.stop()
		out, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%s did not start: %s", s.ID, strings.TrimSpace(string(out)))
	}
	if s.Kind == "nginx" {
		// The master forks its workers before or just after it listens.
		for i := 0; i < 50; i++ {
			if kids := children(cmd.Process.Pid); len(kids) >= s.Loops {
				sv.pids = append(sv.pids, kids...)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return sv, nil
}

func (sv *server) waitListening(limit time.Duration) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		select {
		case <-sv.done:
			return false
		default:
		}
		if dialIn(sv.netns, fmt.Sprintf("%s:%d", sv.host, sv.port)) == nil {
			return true
		}
	}
	return false
}

// stop sends SIGTERM (twinloop prints its counters and drains, nginx
// stops its workers) and waits up to 10 s before SIGKILL.
func (sv *server) stop() {
	sv.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-sv.done:
	case <-time.After(10 * time.Second):
		sv.cmd.Process.Kill()
		<-sv.done
	}
}

// syscallsPerReq is twinloop's own count from its exit line ("server:
// stopped; requests=N ... syscalls=M ..."), over its life: "" for the
// peers, or when the line is missing.
func (sv *server) syscallsPerReq() string {
	f, err := os.Open(sv.log)
	if err != nil {
		return ""
	}
	defer f.Close()
	var req, sys float64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "server: stopped; ")
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(rest) {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "requests":
				req, _ = strconv.ParseFloat(v, 64)
			case "syscalls":
				sys, _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	if req == 0 {
		return ""
	}
	return fmt.Sprintf("%.3f", sys/req)
}

// dialIn connects to addr from network namespace ns ("" for this one):
// from a thread of its own moved into ns (setns), which Go ends when the
// goroutine returns locked to it.
func dialIn(ns, addr string) error {
	if ns == "" {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		errc <- err
	}()
	return <-errc
}

// children are pid's child processes.
func children(pid int) []int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// nextPort is the next port of the lab's range (-ports, 21000-21099)
// nothing listens on.
func (r *runner) nextPort() (int, error) {
	n := r.ports[1] - r.ports[0] + 1
	for i := 0; i < n; i++ {
		p := r.ports[0] + r.port%n
		r.port++
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			ln.Close()
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port in %d-%d (-ports)", r.ports[0], r.ports[1])
}

// nginxConf writes a config like a tuned static-file nginx (lib.sh
// nginx_conf's), everything it writes kept under dir, and returns its
// path. accessLog logs each request to dir/access.log in the combined
// format, unbuffered (one write(2) per request, nginx's default), as
// seed 003's server logged synchronously to a file; without it the log
// is off.
func nginxConf(dir string, workers int, host string, port int, docroot string, accessLog, aioThreads bool) (string, error) {
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return "", err
	}
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	nofile := int(lim.Cur)
	conns := min(nofile-100, 20000)
	logLine := "access_log off;"
	if accessLog {
		logLine = "access_log " + filepath.Join(dir, "access.log") + " combined;"
	}
	if aioThreads {
		logLine += "\n    aio threads;" // its default pool: 32 threads, max_queue 65536
	}
	conf := fmt.Sprintf(`# Written by scripts/labrun for one cell (as scripts/lib.sh nginx_conf).
daemon off;
master_process on;
worker_processes %[1]d;
worker_rlimit_nofile %[2]d;
pid %[3]s/nginx.pid;
error_log %[3]s/error.log warn;

events {
    worker_connections %[4]d;
    use epoll;
}

http {
    %[7]s
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    open_file_cache max=1000 inactive=60s;
    open_file_cache_valid 60s;
    types { text/html html; }
    default_type application/octet-stream;
    client_body_temp_path %[3]s/tmp/client_body;
    proxy_temp_path %[3]s/tmp/proxy;
    fastcgi_temp_path %[3]s/tmp/fastcgi;
    uwsgi_temp_path %[3]s/tmp/uwsgi;
    scgi_temp_path %[3]s/tmp/scgi;

    server {
        # backlog as twinloop's listen.Backlog (the kernel caps both at somaxconn)
        listen %[8]s:%[5]d reuseport backlog=4096;
        root %[6]s;
        location / { }
    }
}
`, workers, nofile, dir, conns, port, docroot, logLine, host)
	path := filepath.Join(dir, "nginx.conf")
	return path, os.WriteFile(path, []byte(conf), 0o644)
}

// makeDocroot writes the fixture files (lib.sh make_docroot's):
// index.html is exactly 1500 bytes (one Ethernet MTU of payload),
// 64k.html 65536 bytes (twinloop's --mem-body-max), 1m.html 1 MiB.
func makeDocroot(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	line := "<p>twinloop benchmark fixture: the quick brown fox jumps over the lazy dog.</p>\n"
	fill := func(prefix string, n int) []byte {
		b := []byte(prefix)
		for len(b) < n {
			b = append(b, line...)
		}
		return b[:n]
	}
	files := map[string][]byte{
		"index.html": fill("<!doctype html>\n<title>bench</title>\n", 1500),
		"64k.html":   fill("", 65536),
		"1m.html":    fill("", 1<<20),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	// nginx's workers run as nobody when the master is root.
	return os.Chmod(dir, 0o755)
}
