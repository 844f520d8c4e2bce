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
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	flags "github.com/jessevdk/go-flags"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend"
	"github.com/twinloop/twinloop/backend/uring"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// TestMain lets the tests run the real binary: the test executable runs
// main's run() when TWINLOOP_MAIN is set.
func TestMain(m *testing.M) {
	if os.Getenv("TWINLOOP_MAIN") == "1" {
		if n := os.Getenv("TWINLOOP_NOFILE"); n != "" {
			lim, _ := strconv.ParseUint(n, 10, 64)
			syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: lim, Max: lim})
		}
		if n := os.Getenv("TWINLOOP_FAIL_LOOP"); n != "" {
			injectFault(n)
		}
		if p := os.Getenv("TWINLOOP_HANG_PATH"); p != "" {
			wrapFileCalls = func(fc core.FileCalls) core.FileCalls {
				return hangCalls{FileCalls: fc, path: p, mark: os.Getenv("TWINLOOP_HANG_MARK")}
			}
		}
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// injectFault makes loop n's wait fail once with EBADF, as a closed epoll
// fd or ring would, as soon as the file TWINLOOP_FAIL_WHEN exists.
func injectFault(n string) {
	id, _ := strconv.Atoi(n)
	var fired atomic.Bool
	backend.InjectFault(func(loop int) syscall.Errno {
		if loop != id || fired.Load() {
			return 0
		}
		if _, err := os.Stat(os.Getenv("TWINLOOP_FAIL_WHEN")); err != nil {
			return 0
		}
		fired.Store(true)
		return syscall.EBADF
	})
}

// hangCalls is a file system that never answers for one path, as a hung
// NFS server or a paused FUSE daemon: an open of it creates the file mark,
// so that the test knows, and waits for good.
type hangCalls struct {
	core.FileCalls
	path, mark string
}

func (h hangCalls) Openat2(dirfd int, path string, how *unix.OpenHow) (int, error) {
	if path == h.path {
		os.WriteFile(h.mark, nil, 0o644)
		select {}
	}
	return h.FileCalls.Openat2(dirfd, path, how)
}

func server(t *testing.T, args ...string) (*exec.Cmd, *servertest.Buffer, *servertest.Buffer) {
	return serverEnv(t, nil, args...)
}

func serverEnv(t *testing.T, env []string, args ...string) (*exec.Cmd, *servertest.Buffer, *servertest.Buffer) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "TWINLOOP_MAIN=1"), env...)
	var stdout, stderr servertest.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &stdout, &stderr
}

func runMain(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestFlagErrorsAreOneLine(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		code int
		says string
	}{
		{args: []string{"--bogus"}, code: 2, says: "unknown flag"},
		{args: []string{"--backend=kqueue"}, code: 2, says: "Invalid value"},
		{args: []string{"--port", "70000"}, code: 2, says: "not a TCP port"},
		{args: []string{"--port", "x"}, code: 2, says: "invalid argument"},
		{args: []string{"-d", filepath.Join(dir, "missing")}, code: 1, says: "give --dir an existing, readable directory"},
		{args: []string{"--header-timeout", "-1s", "-d", dir}, code: 2, says: "timeouts must be positive"},
		{args: []string{"stray", "-d", dir}, code: 2, says: "unexpected argument"},
		{args: []string{"-d", dir, "--cgi-dir", filepath.Join(dir, "missing")}, code: 1, says: "give --cgi-dir an existing, readable directory"},
		{args: []string{"-d", dir, "--cgi-dir", dir, "--cgi-timeout", "0s"}, code: 2, says: "timeouts must be positive"},
		{args: []string{"-d", dir, "--cgi-dir", dir, "--cgi-max", "0"}, code: 2, says: "--cgi-max 0: give the most scripts"},
		{args: []string{"-d", dir, "--max-ranges", "-1"}, code: 2, says: "give 0 (Range ignored) or more"},
		{args: []string{"-d", dir, "--cache-control", ".css"}, code: 2, says: "give .EXT=VALUE"},
		{args: []string{"-d", dir, "--cache-control", "a\nb"}, code: 2, says: "on one line"},
		{args: []string{"-d", dir, "--cache-control", ".css,js=x"}, code: 2, says: "write them as .css,.js"},
		{args: []string{"-d", dir, "--cache-control", "x", "--cache-control", "y"}, code: 2, says: "keep one"},
		{args: []string{"-d", dir, "--header", "*.js"}, code: 2, says: "write PATTERN=Name: value"},
		{args: []string{"-d", dir, "--error-page", "404"}, code: 2, says: "write CODE=/PATH"},
		{args: []string{"-d", dir, "--error-page", "400=/400.html"}, code: 2, says: "400 has no error page; give one of [403 404 405"},
		{args: []string{"-d", dir, "--error-page", "404=/a.html", "--error-page", "404=/b.html"}, code: 2, says: "404 has a page already (/a.html)"},
		{args: []string{"-d", dir, "--error-page", "404=/.a.html"}, code: 1, says: "not hidden"},
		{args: []string{"-d", dir, "--fallback", "/index.html"}, code: 1, says: "--fallback \"/index.html\": no such file or directory"},
		{args: []string{"-d", dir, "--header", "*.js=Content-Length: 1"}, code: 2, says: "Content-Length is the server's own field"},
		{args: []string{"-d", dir, "--header", "*.js=X-A: a\rb"}, code: 2, says: "control byte"},
		{args: []string{"-d", dir, "--uring-sqpoll", "two"}, code: 2, says: "--uring-sqpoll \"two\": give off, or the number of the CPU"},
		{args: []string{"-d", dir, "--uring-reg-ring=yes"}, code: 2, says: "Invalid value"},
		{args: []string{"-d", dir, "--uring-napi", "on"}, code: 2, says: "--uring-napi \"on\": give off, or the busy-poll time in microseconds"},
		{args: []string{"-d", dir, "--uring-napi=-1"}, code: 2, says: "--uring-napi \"-1\": give off"},
		{args: []string{"-d", dir, "--uring-send-zc", "64k"}, code: 2, says: "--uring-send-zc \"64k\": give off, or the size in bytes"},
		{args: []string{"-d", dir, "--uring-send-zc", "0"}, code: 2, says: "--uring-send-zc \"0\": give off, or the size in bytes"},
		{args: []string{"-d", dir, "--uring-send-zc=-1"}, code: 2, says: "give off, or the size in bytes"},
		{args: []string{"-d", dir, "--proxy-protocol", "--proxy-from", "10.0.0.0/33"}, code: 2, says: "--proxy-from \"10.0.0.0/33\": give a network"},
		{args: []string{"-d", dir, "--proxy-protocol", "--proxy-from", "fe80::1%eth0"}, code: 2, says: "give a network"},
		{args: []string{"-d", dir, "--proxy-from", "10.0.0.0/8"}, code: 2, says: "--proxy-from is for --proxy-protocol, which is off"},
		{args: []string{"-d", dir, "--drain-delay", "-1s"}, code: 2, says: "--drain-delay -1s: give 0"},
	}
	for _, tc := range cases {
		code, out, errs := runMain(tc.args...)
		assert.Equal(t, tc.code, code, tc.args)
		assert.Empty(t, out, tc.args)
		assert.Contains(t, errs, tc.says, tc.args)
		assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q", errs)
	}
}

func TestHelp(t *testing.T) {
	code, out, _ := runMain("--help")
	assert.Equal(t, 0, code)
	for _, f := range []string{"--backend", "--port", "--dir", "--loops", "--verbose", "-p,", "-d,", "-v,", "-h,",
		"--header-timeout", "--keepalive-timeout", "--write-timeout", "--max-conns", "--no-keepalive", "--no-file-cache", "--sendfile",
		"--cgi-dir", "--cgi-timeout", "--cgi-max", "--epoll-trigger=[edge|level]", "--epoll-cork=[off|on]", "--precompressed", "--max-ranges", "--cache-control",
		"--cache-inactive", "--fs-timeout", "--config", "--write-config", "--header=PATTERN=Name: value", "--fallback=/PATH", "--error-page=CODE=/PATH",
		"--proxy-protocol", "--proxy-from=CIDR", "127.0.0.0/8, ::1/128)", "--drain-delay=", "(default: 0s)",
		"--uring-multishot=[on|off]", "--uring-batch=[on|off]", "--uring-body=[sendfile|splice|read|view|view-zc]", "--uring-enter=[wait|raw]", "--uring-wait=[batch|block|spin|raw]",
		"--uring-reg-ring=[on|off]", "--uring-skip-send=[on|off]", "--uring-recv-bundle=[on|off]", "--uring-buf-inc=[on|off]",
		"--uring-sqpoll=off|CPU", "--uring-wait-region=[on|off]", "--uring-napi=off|USEC", "--uring-send-zc=off|SIZE", "--uring-fixed-files=[on|off]"} {
		assert.Contains(t, out, f)
	}
}

// TestBackendOptions: each ablation flag reaches its backend switch, and
// the defaults are every backend's defaults.
func TestBackendOptions(t *testing.T) {
	cases := []struct {
		args []string
		want backend.Options
	}{
		{args: nil, want: backend.Options{}},
		{args: []string{"--epoll-trigger=level"}, want: backend.Options{EpollLevel: true}},
		{args: []string{"--epoll-cork=on"}, want: backend.Options{EpollCork: true}},
		{args: []string{"--uring-multishot=off"}, want: backend.Options{UringOneShot: true}},
		{args: []string{"--uring-batch=off"}, want: backend.Options{UringSubmitEach: true}},
		{args: []string{"--uring-body=read"}, want: backend.Options{UringBody: uring.BodyRead}},
		{args: []string{"--uring-body=splice"}, want: backend.Options{UringBody: uring.BodySplice}},
		{args: []string{"--uring-enter=raw"}, want: backend.Options{UringRawSubmit: true}},
		{args: []string{"--uring-wait=block"}, want: backend.Options{UringWait: uring.WaitBlock}},
		{args: []string{"--uring-wait=raw"}, want: backend.Options{UringWait: uring.WaitRaw}},
		{args: []string{"--uring-multishot=on", "--uring-batch=on", "--uring-body=sendfile", "--uring-enter=wait", "--uring-wait=batch"}, want: backend.Options{}},
		{args: []string{"--cgi-dir=x"}, want: backend.Options{CGI: true}},
		{args: []string{"--uring-reg-ring=on"}, want: backend.Options{UringFeatures: uring.Features{RegRing: true}}},
		{args: []string{"--uring-skip-send=on"}, want: backend.Options{UringFeatures: uring.Features{SkipSend: true}}},
		{args: []string{"--uring-recv-bundle=on"}, want: backend.Options{UringFeatures: uring.Features{Bundle: true}}},
		{args: []string{"--uring-buf-inc=on"}, want: backend.Options{UringFeatures: uring.Features{BufInc: true}}},
		{args: []string{"--uring-sqpoll=1"}, want: backend.Options{UringFeatures: uring.Features{SQPoll: true, SQPollCPU: 1}}},
		{args: []string{"--uring-sqpoll=0"}, want: backend.Options{UringFeatures: uring.Features{SQPoll: true}}},
		{args: []string{"--uring-wait-region=on"}, want: backend.Options{UringFeatures: uring.Features{WaitRegion: true}}},
		{args: []string{"--uring-napi=50"}, want: backend.Options{UringFeatures: uring.Features{NAPI: true, NAPIBusyPollUsec: 50}}},
		{args: []string{"--uring-napi=0"}, want: backend.Options{UringFeatures: uring.Features{NAPI: true}}},
		{args: []string{"--uring-send-zc=65536"}, want: backend.Options{UringFeatures: uring.Features{SendZC: 65536}}},
		{args: []string{"--uring-send-zc=1"}, want: backend.Options{UringFeatures: uring.Features{SendZC: 1}}},
		{args: []string{"--uring-fixed-files=on"}, want: backend.Options{UringFeatures: uring.Features{FixedFiles: true}}},
		{args: []string{"--uring-reg-ring=off", "--uring-skip-send=off", "--uring-recv-bundle=off", "--uring-buf-inc=off", "--uring-sqpoll=off", "--uring-wait-region=off", "--uring-napi=off", "--uring-send-zc=off", "--uring-fixed-files=off"},
			want: backend.Options{}},
	}
	for _, tc := range cases {
		var o options
		_, err := flags.NewParser(&o, flags.None).ParseArgs(tc.args)
		require.NoError(t, err, tc.args)
		assert.Equal(t, tc.want, o.backendOptions(), tc.args)
	}
	code, _, errs := runMain("--uring-batch=maybe")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "Invalid value")
}

func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	code, _, errs := runMain("--listen", ln.Addr().String(), "-d", t.TempDir(), "--backend=epoll")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "address already in use")
	assert.Contains(t, errs, "choose another --port")
}

// TestSecondServerRefused: every listener has SO_REUSEPORT, so without a
// check a second server on the port would bind next to the first, and the
// kernel would split connections between them. It must refuse instead.
func TestSecondServerRefused(t *testing.T) {
	dir := t.TempDir()
	addr := "127.0.0.1:" + freePort(t)
	server(t, "--backend=epoll", "--listen", addr, "-d", dir, "--loops", "2")
	servertest.WaitAccepting(t, addr)
	code, _, errs := runMain("--backend=epoll", "--listen", addr, "-d", dir)
	assert.Equal(t, 1, code)
	assert.Equal(t, 1, strings.Count(errs, "\n"), errs)
	assert.Contains(t, errs, "server: listen on "+addr+": bind: address already in use (another process has this port: stop it, choose another --port, or to replace a running twinloop without downtime start with --takeover)")
}

// TestTakeoverFlag: --takeover shares the port a server already has, the
// old one exits 0 on SIGTERM, and the new one serves on. With
// net.ipv4.tcp_migrate_req off, both say so in one line, with what to set.
// (backend.TestTakeover checks that no request fails meanwhile.)
func TestTakeoverFlag(t *testing.T) {
	dir := servertest.Site(t, map[string]string{"index.html": "hello\n"})
	addr := "127.0.0.1:" + freePort(t)
	maddr := "127.0.0.1:" + freePort(t)
	notifySock := filepath.Join(t.TempDir(), "notify")
	notified, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifySock, Net: "unixgram"})
	require.NoError(t, err)
	defer notified.Close()
	old, _, oldErr := serverEnv(t, []string{"NOTIFY_SOCKET=" + notifySock}, "--backend=epoll", "--listen", addr, "-d", dir, "--loops", "1", "--metrics", maddr)
	// systemd (Type=notify) learns that the server is ready once it listens.
	notified.SetReadDeadline(time.Now().Add(10 * time.Second))
	msg := make([]byte, 64)
	n, err := notified.Read(msg)
	require.NoError(t, err)
	assert.Equal(t, "READY=1", string(msg[:n]))
	servertest.WaitAccepting(t, addr)
	// The metrics port is shared as well.
	_, _, newErr := server(t, "--backend=epoll", "--listen", addr, "-d", dir, "--loops", "1", "--takeover", "--metrics", maddr)
	require.Eventually(t, func() bool { return strings.Contains(newErr.String(), "server: serving") }, 5*time.Second, 10*time.Millisecond, newErr.String())
	require.NoError(t, old.Process.Signal(syscall.SIGTERM))
	n, err = notified.Read(msg)
	require.NoError(t, err)
	assert.Equal(t, "STOPPING=1", string(msg[:n]))
	require.NoError(t, old.Wait())
	assert.Equal(t, 0, old.ProcessState.ExitCode())
	resp, err := http.Get("http://" + maddr + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "the new server's metrics")
	for range 20 {
		resp, err := http.Get("http://" + addr + "/")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
	}
	sysctl, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_migrate_req")
	const hint = "net.ipv4.tcp_migrate_req is 0: when a server sharing a port with --takeover stops, connections still queued on its listeners are reset instead of moved to the other server (set it: sysctl -w net.ipv4.tcp_migrate_req=1, and in /etc/sysctl.d/ to keep it)"
	if strings.TrimSpace(string(sysctl)) == "0" {
		assert.Contains(t, newErr.String(), "server: --takeover: "+hint+"\n")
		assert.Contains(t, oldErr.String(), "server: stopping; "+hint+"\n")
	} else {
		assert.NotContains(t, newErr.String(), "tcp_migrate_req")
		assert.NotContains(t, oldErr.String(), "tcp_migrate_req")
	}
}

// TestMetricsFlag: /metrics is served by the binary on its own listener,
// and an address that cannot be had is refused at start, in one line.
func TestMetricsFlag(t *testing.T) {
	dir := t.TempDir()
	addr, maddr := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
	_, _, stderr := server(t, "--backend=epoll", "--listen", addr, "-d", dir, "--loops", "1", "--metrics", maddr)
	servertest.WaitAccepting(t, addr)
	// The listeners accept (into their backlog) before the line is
	// printed: wait for it.
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "server: serving") }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, stderr.String(), "; metrics at http://"+maddr+"/metrics\n")
	resp, err := http.Get("http://" + maddr + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, string(body), `twinloop_info{backend="epoll"} 1`)

	code, _, errs := runMain("--backend=epoll", "--listen", "127.0.0.1:0", "-d", dir, "--metrics", maddr)
	assert.Equal(t, 1, code)
	assert.Equal(t, 1, strings.Count(errs, "\n"), errs)
	assert.Contains(t, errs, "server: --metrics "+maddr+": listen on "+maddr+": bind: address already in use (another process has this port")
}

// TestLoopFailureExitsNonZero: when a loop dies, the server says which and
// why in one line, shuts down, and exits 1 so that a supervisor restarts
// it, instead of serving on degraded or exiting 0.
func TestLoopFailureExitsNonZero(t *testing.T) {
	for _, be := range []string{"epoll", "uring", "poll"} {
		t.Run(be, func(t *testing.T) {
			if b, _, err := backend.Choose(be, backend.Options{}); err != nil || b == nil {
				t.Skipf("backend %s cannot run here: %v", be, err)
			}
			dir := servertest.Site(t, map[string]string{"index.html": "hello\n"})
			trigger := filepath.Join(t.TempDir(), "fail-now")
			addr := "127.0.0.1:" + freePort(t)
			cmd, _, stderr := serverEnv(t, []string{"TWINLOOP_FAIL_LOOP=1", "TWINLOOP_FAIL_WHEN=" + trigger},
				"--backend="+be, "--listen", addr, "-d", dir, "--loops", "2")
			servertest.WaitAccepting(t, addr)
			resp, err := http.Get("http://" + addr + "/")
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, 200, resp.StatusCode)
			require.NoError(t, os.WriteFile(trigger, nil, 0o644))
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case <-exited:
			case <-time.After(15 * time.Second):
				t.Fatalf("the server did not exit after loop 1 failed; stderr:\n%s", stderr)
			}
			assert.Equal(t, 1, cmd.ProcessState.ExitCode())
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			require.Len(t, lines, 2, "the serving line, then one line about the failure: %q", lines)
			call := map[string]string{"epoll": "epoll_wait", "uring": "io_uring_enter", "poll": "ppoll"}[be]
			assert.Equal(t, "server: backend "+be+": loop 1 failed: "+call+": bad file descriptor; the server stopped (exit status 1: restart it, and report the error if it repeats)", lines[1])
			// The kernel drops a ring's last requests (an accept holding a
			// listener) just after the process has gone.
			assert.Eventually(t, func() bool {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err == nil {
					c.Close()
				}
				return err != nil
			}, 5*time.Second, 20*time.Millisecond, "nothing listens any more")
		})
	}
}

func TestUringUnavailableIsOneLine(t *testing.T) {
	if uring.New().Probe() == nil {
		t.Skip("io_uring works here; the refusal path cannot be seen")
	}
	code, _, errs := runMain("--backend=uring", "--listen", "127.0.0.1:0", "-d", t.TempDir())
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "backend uring cannot run here")
	assert.Equal(t, 1, strings.Count(errs, "\n"), errs)
}

// TestUringFeatureRefused: an io_uring feature that cannot run here
// (a CPU this process may not use, as a kernel without the feature would)
// makes --backend=uring refuse to start, in one line that says why, and
// --backend=auto start on epoll with a note that says why.
func TestUringFeatureRefused(t *testing.T) {
	if err := uring.New().Probe(); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	code, _, errs := runMain("--backend=uring", "--uring-sqpoll=100000", "--listen", "127.0.0.1:0", "-d", t.TempDir())
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "backend uring cannot run here")
	assert.Contains(t, errs, "CPU 100000 is not one this process may run on")
	assert.Equal(t, 1, strings.Count(errs, "\n"), errs)

	var o options
	_, err := flags.NewParser(&o, flags.None).ParseArgs([]string{"--uring-sqpoll=100000"})
	require.NoError(t, err)
	b, notes, err := backend.Choose("auto", o.backendOptions())
	require.NoError(t, err)
	assert.Equal(t, "epoll", b.Name())
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "CPU 100000")
}

// TestServeAndStop runs the binary: it serves, logs access off the loop,
// and on SIGTERM finishes, prints its counters and exits 0.
func TestServeAndStop(t *testing.T) {
	for _, be := range []string{"epoll", "poll", "auto"} {
		t.Run(be, func(t *testing.T) {
			dir := servertest.Site(t, map[string]string{"index.html": "hello\n"})
			port := freePort(t)
			cmd, stdout, stderr := server(t, "--backend="+be, "--listen", "127.0.0.1:"+port, "-d", dir, "--loops", "2", "-v")
			servertest.WaitAccepting(t, "127.0.0.1:"+port)
			resp, err := http.Get("http://127.0.0.1:" + port + "/")
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, "hello\n", string(body))
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, cmd.Wait())
			assert.Equal(t, 0, cmd.ProcessState.ExitCode())
			assert.Contains(t, stdout.String(), `"GET / HTTP/1.1" 200 6`)
			sc := bufio.NewScanner(strings.NewReader(stderr.String()))
			var last string
			for sc.Scan() {
				last = sc.Text()
			}
			assert.Contains(t, last, "server: stopped; requests=1 ")
			assert.Contains(t, last, "syscalls_per_req=")
		})
	}
}

// TestShutdownWithHungFS runs the binary (issue 25): on SIGTERM while a
// request waits for a file system that never answers, it exits 0 within
// --shutdown-timeout plus core.ShutdownGrace (and 2 s of slack), after its
// counters, with one line that says it left one operation behind.
func TestShutdownWithHungFS(t *testing.T) {
	for _, be := range []string{"epoll", "uring"} {
		t.Run(be, func(t *testing.T) {
			if b, _, err := backend.Choose(be, backend.Options{}); err != nil || b == nil {
				t.Skipf("backend %s cannot run here: %v", be, err)
			}
			dir := servertest.Site(t, map[string]string{"index.html": "hello\n", "hung/a.txt": "a\n"})
			mark := filepath.Join(t.TempDir(), "held")
			addr := "127.0.0.1:" + freePort(t)
			cmd, _, stderr := serverEnv(t, []string{"TWINLOOP_HANG_PATH=hung", "TWINLOOP_HANG_MARK=" + mark},
				"--backend="+be, "--listen", addr, "-d", dir, "--autoindex", "--shutdown-timeout", "500ms")
			servertest.WaitAccepting(t, addr)
			c := servertest.Dial(t, addr)
			fmt.Fprintf(c, "GET /hung/ HTTP/1.1\r\nHost: t\r\n\r\n") // a listing: always on a helper
			require.Eventually(t, func() bool { _, err := os.Stat(mark); return err == nil }, 5*time.Second, time.Millisecond)

			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			bound := 500*time.Millisecond + core.ShutdownGrace + 2*time.Second
			select {
			case err := <-exited:
				require.NoError(t, err, stderr.String())
			case <-time.After(bound):
				require.FailNow(t, "the server did not exit while the file system held a call", "bound %v; stderr:\n%s", bound, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			require.GreaterOrEqual(t, len(lines), 2, stderr.String())
			assert.Contains(t, lines[len(lines)-2], "server: stopped; ")
			assert.Equal(t, "server: stopped waiting for 1 file-system operation(s) at --shutdown-timeout + 3s: "+
				"a file system does not answer (a hung NFS server, a paused FUSE daemon?); every connection was closed; "+
				"what those operations open is closed if they ever finish", lines[len(lines)-1])
		})
	}
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// TestFDExhaustion: with the fd limit reached, a loop must not spin on
// accept4's EMFILE, must say what to do, and must serve again once fds free.
func TestFDExhaustion(t *testing.T) {
	for _, be := range []string{"epoll", "uring", "poll"} {
		t.Run(be, func(t *testing.T) {
			if be == "uring" {
				if err := uring.New().Probe(); err != nil {
					t.Skipf("io_uring unavailable: %v", err)
				}
			}
			dir := servertest.Site(t, map[string]string{"index.html": "hello\n"})
			port := freePort(t)
			addr := "127.0.0.1:" + port
			cmd, _, stderr := serverEnv(t, []string{"TWINLOOP_NOFILE=40"}, "--backend="+be, "--listen", addr, "-d", dir, "--loops", "1")
			get := func() error {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					return err
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(time.Second))
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					return err
				}
				resp.Body.Close()
				return nil
			}
			require.Eventually(t, func() bool { return get() == nil }, 5*time.Second, 20*time.Millisecond)
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for range 60 {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				require.NoError(t, err) // the kernel's backlog takes them
				// Half a request: the listener defers accept until data.
				fmt.Fprintf(c, "GET / HTTP/1.1\r\n")
				held = append(held, c)
			}
			time.Sleep(300 * time.Millisecond)
			before := cpuTicks(t, cmd.Process.Pid)
			time.Sleep(time.Second)
			used := cpuTicks(t, cmd.Process.Pid) - before
			// A loop spinning on EMFILE burns ~100 ticks a second.
			assert.Less(t, used, int64(30), "server used %d ticks in 1s while out of fds", used)
			for _, c := range held {
				c.Close()
			}
			held = nil
			assert.Eventually(t, func() bool { return get() == nil }, 10*time.Second, 100*time.Millisecond,
				"serving resumes when fds free up")
			assert.Contains(t, stderr.String(), "raise the fd limit")
		})
	}
}

// cpuTicks is utime+stime of pid, in clock ticks.
func cpuTicks(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// TestCGI runs the binary with --cgi-dir: a script answers, keep-alive
// holds, and SIGTERM leaves no script behind.
func TestCGI(t *testing.T) {
	dir := t.TempDir()
	cgi := servertest.Scripts(t, map[string]string{"hello": "printf 'Content-Type: text/plain\\n\\n'\necho \"hello $REQUEST_METHOD $QUERY_STRING\"\n"})
	port := freePort(t)
	cmd, _, stderr := server(t, "--backend=auto", "--listen", "127.0.0.1:"+port, "-d", dir, "--cgi-dir", cgi, "--cgi-timeout", "5s")
	var resp *http.Response
	var err error
	for i := 0; i < 100; i++ {
		if resp, err = http.Get("http://127.0.0.1:" + port + "/cgi-bin/hello?x=1"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "hello GET x=1\n", string(body))
	resp, err = http.Post("http://127.0.0.1:"+port+"/cgi-bin/hello", "text/plain", strings.NewReader("data"))
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "hello POST \n", string(body))
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
	want := "epoll"
	if uring.New().Probe() == nil {
		want = "uring" // it runs scripts too (backend.RunsCGI)
	}
	assert.Contains(t, stderr.String(), "with backend "+want, "auto takes the first backend that can run here and run scripts")
	assert.NotContains(t, stderr.String(), "tcp_migrate_req", "a server alone on its port has no replacement to warn about")
}

func TestCacheControlFlag(t *testing.T) {
	var o options
	_, err := flags.NewParser(&o, flags.None).ParseArgs([]string{"--cache-control", "public, max-age=60",
		"--cache-control", ".CSS, .js=max-age=31536000, immutable", "--max-ranges", "0", "--precompressed"})
	require.NoError(t, err)
	require.NoError(t, o.check())
	cfg := o.config(io.Discard)
	assert.Equal(t, "public, max-age=60", cfg.CacheControl)
	assert.Equal(t, map[string]string{".css": "max-age=31536000, immutable", ".js": "max-age=31536000, immutable"}, cfg.CacheControlByExt)
	assert.Equal(t, -1, cfg.MaxRanges, "--max-ranges 0 turns ranges off")
	assert.True(t, cfg.Precompressed)

	o = options{}
	_, err = flags.NewParser(&o, flags.None).ParseArgs(nil)
	require.NoError(t, err)
	require.NoError(t, o.check())
	cfg = o.config(io.Discard)
	assert.Empty(t, cfg.CacheControl)
	assert.Nil(t, cfg.CacheControlByExt)
	assert.Equal(t, 100, cfg.MaxRanges)
	assert.False(t, cfg.Precompressed, "off by default, as nginx gzip_static")
}

// TestHeaderFlag: --header rules reach the core in the order given.
func TestHeaderFlag(t *testing.T) {
	o := parse(t, "--header", "/assets/**=Cache-Tag: a=b", "--header", "*.js=X-Content-Type-Options:nosniff")
	assert.Equal(t, []core.HeaderRule{
		{Pattern: "/assets/**", Name: "Cache-Tag", Value: "a=b"},
		{Pattern: "*.js", Name: "X-Content-Type-Options", Value: "nosniff"},
	}, o.config(io.Discard).Headers)
	assert.Empty(t, parse(t).config(io.Discard).Headers, "none by default")
}

// TestErrorPageAndFallbackFlags: --error-page and --fallback reach the
// core.
func TestErrorPageAndFallbackFlags(t *testing.T) {
	cfg := parse(t, "--error-page", "404=/404.html", "--error-page", "503=/busy.html", "--fallback", "/index.html").config(io.Discard)
	assert.Equal(t, map[int]string{404: "/404.html", 503: "/busy.html"}, cfg.ErrorPages)
	assert.Equal(t, "/index.html", cfg.Fallback)
	cfg = parse(t).config(io.Discard)
	assert.Nil(t, cfg.ErrorPages, "none by default")
	assert.Empty(t, cfg.Fallback, "none by default")
}

// TestSparePForHelpers: an epoll server gets one P more than its loops,
// for the file-system helpers, unless the operator set GOMAXPROCS.
func TestSparePForHelpers(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	t.Setenv("GOMAXPROCS", "")
	sparePForHelpers(1)
	assert.Equal(t, 2, runtime.GOMAXPROCS(0))
	sparePForHelpers(1)
	assert.Equal(t, 2, runtime.GOMAXPROCS(0), "already enough")
	runtime.GOMAXPROCS(1)
	t.Setenv("GOMAXPROCS", "1")
	sparePForHelpers(1)
	assert.Equal(t, 1, runtime.GOMAXPROCS(0), "the operator's GOMAXPROCS stands")
}
