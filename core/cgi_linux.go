package core

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// This file holds the CGI script's process: looking the script up, the
// pipes, starting it on its own goroutine, feeding its stdin, killing its
// process group and reaping it (and what it left running:
// cgi_sweep_linux.go). The loop's thread makes only non-blocking calls
// here (openat2, fstat, pipe2, kill); fork, exec, the blocking stdin
// writes and wait happen on the job's goroutines.

// cgiNameStatus refuses, before any call, a script name that cannot be
// one: empty (404), a dotfile or with a '/' (403). The name has no '/'
// normally (resolvePath decoded and split the path).
func cgiNameStatus(name []byte) int {
	switch {
	case len(name) == 0:
		return 404
	case name[0] == '.' || bytes.IndexByte(name, '/') >= 0:
		return 403
	}
	return 0
}

// cgiLookup checks that name is a regular, executable file directly in the
// CGI directory (ld.root), and returns the status to answer, 0 if it is:
// a loader's job, on the loop or a helper (Loop.findCGI), since the stat
// may wait for the disk. openat2 with RESOLVE_BENEATH makes the kernel
// refuse a symlink that leads out of the directory; O_PATH opens nothing
// for I/O.
func (ld *loader) cgiLookup(name string) int {
	ld.what = name
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := ld.fs.openat2(ld.root, name, &how)
	if err != nil {
		return ld.status(err)
	}
	fi, err := ld.fstat(fd)
	ld.fs.close(fd)
	switch {
	case err != nil:
		return 500
	case !fi.isReg(), fi.mode&0o111 == 0:
		return 403
	}
	return 0
}

// openCGIDir opens the CGI directory as the document root is opened, and
// returns its absolute path, from which scripts are run.
func openCGIDir(dir string) (int, string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return -1, "", err
	}
	fd, err := openRoot(abs)
	return fd, abs, err
}

// stdoutPipe makes the pipe a script writes its output into: the loop's
// end is non-blocking, the script's end is made blocking by the goroutine
// that starts it. Both are close-on-exec: the script gets its end as fd 1
// by dup2, and no other child inherits either.
func (l *Loop) stdoutPipe() (r, w int, err error) {
	var p [2]int
	if err := l.sys().pipe2(&p, unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return -1, -1, err
	}
	return p[0], p[1], nil
}

// start runs the job's goroutine. stdoutW is the script's end of the
// output pipe, which the goroutine closes once the script has it.
func (j *cgiJob) start(stdoutW int) {
	j.l.srv.cgiWG.Add(1)
	go j.run(stdoutW)
}

// run starts the script, hands its stdin to a writer goroutine, waits for
// it to exit, kills what it left running and reaps it all, then posts the
// exit to the loop. It never touches the Conn.
func (j *cgiJob) run(stdoutW int) {
	defer j.l.srv.cgiWG.Done()
	defer j.l.srv.cgiRelease()       // reaped with what it left, or never started
	unix.SetNonblock(stdoutW, false) // uncounted: the job's goroutine, not the loop's thread
	stdout := os.NewFile(uintptr(stdoutW), "cgi-stdout")
	cmd := &exec.Cmd{
		Path:   j.path,
		Args:   []string{j.path},
		Env:    j.env,
		Dir:    j.dir, // RFC 3875 §7.2: the script's own directory
		Stdout: stdout,
		Stderr: os.Stderr, // the server's error log
		// Its own session, and so its own process group: a timeout or a
		// client that went away kills the group, and what left the group
		// but not the session is still known to be the script's when it
		// exits (cgi_sweep_linux.go).
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	// The pipes, by inode: what still holds one when the script exits is
	// the script's, whatever session it is in.
	pipes := [2]uint64{pipeInode(stdoutW)}
	var stdinW *os.File
	var err error
	if j.stdin != nil {
		var p [2]int
		if err = unix.Pipe2(p[:], unix.O_CLOEXEC); err == nil { // uncounted: the job's goroutine
			cmd.Stdin = os.NewFile(uintptr(p[0]), "cgi-stdin")
			stdinW = os.NewFile(uintptr(p[1]), "cgi-stdin")
			pipes[1] = pipeInode(p[0])
		}
	}
	j.mu.Lock()
	if j.killed {
		err = errors.New("cancelled before it started")
	}
	j.mu.Unlock()
	var proc *scriptProc
	if err == nil {
		proc, err = sweep.start(cmd, pipes)
	}
	// The script has its ends now; without closing ours it would never
	// see EOF on stdin, nor the loop on stdout.
	stdout.Close()
	if f, ok := cmd.Stdin.(*os.File); ok {
		f.Close()
	}
	if j.stdin != nil {
		if err != nil && stdinW != nil {
			stdinW.Close()
			stdinW = nil
		}
		j.l.srv.cgiWG.Add(1)
		go j.writeStdin(stdinW)
	}
	if err != nil {
		j.report(err)
		j.l.Post(j.exit)
		return
	}
	pid := proc.pid
	j.mu.Lock()
	j.pid = pid
	if j.killed {
		unix.Kill(-pid, unix.SIGKILL) // uncounted: the job's goroutine
	}
	j.mu.Unlock()

	// Wait for the exit without reaping: while the script is a zombie its
	// pid, which is also its session's and process group's id, cannot be
	// reused, so kill(-pid) cannot hit another process group. Once the
	// script exits, its group is killed, then the sweep kills and reaps
	// whatever else it left running, daemonized or not: nothing keeps the
	// output pipe open, so the answer ends with what the script wrote, and
	// the script's place in --cgi-max goes back (deferred) only then.
	var info unix.Siginfo
	for {
		if e := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); e != unix.EINTR { // uncounted: the job's goroutine
			break
		}
	}
	j.mu.Lock()
	unix.Kill(-pid, unix.SIGKILL) // uncounted: the job's goroutine
	j.exited = true
	j.mu.Unlock()
	j.report(sweep.end(proc, cmd.Wait))
	j.l.Post(j.exit)
}

// report writes why a script failed to the server's stderr, from the
// job's goroutine: a loop never waits for a slow stderr. A script the
// server killed (client gone, deadline, shutdown) is not reported.
func (j *cgiJob) report(err error) {
	j.mu.Lock()
	killed := j.killed
	j.mu.Unlock()
	if err != nil && !killed {
		fmt.Fprintf(os.Stderr, "twinloop: cgi %s: %v\n", j.name, err)
	}
}

// writeStdin writes the body chunks the loop hands over to the script's
// stdin (w; nil when the script did not start), and acknowledges each, so
// the loop hands over the next and reads on: at most two chunks per
// request are held. After a failed write (the script exited or closed its
// stdin) chunks are acknowledged and dropped.
func (j *cgiJob) writeStdin(w *os.File) {
	defer j.l.srv.cgiWG.Done()
	for b := range j.stdin {
		if w != nil {
			if _, err := w.Write(b); err != nil {
				w.Close()
				w = nil
			}
		}
		j.l.Post(func() { j.stdinAck(b) })
	}
	if w != nil {
		w.Close()
	}
}

// kill kills the script's process group, on the loop's thread. Before the
// script started it only marks the job, and the goroutine does not start
// it; after the script exited it does nothing: the goroutine kills what
// is left (see run).
func (j *cgiJob) kill() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.killed {
		return
	}
	j.killed = true
	if j.pid > 0 && !j.exited {
		j.l.sys().killGroup(j.pid)
	}
}

// exit runs on the loop's thread once the script has been reaped (or did
// not start).
func (j *cgiJob) exit() {
	l := j.l
	delete(l.jobs, j)
	j.closeStdin()
	if c := j.c; c != nil {
		// Its stdin is gone: the rest of the request body is dropped.
		c.resume()
		l.markReady(c)
	}
}

// waitJobs waits, at server shutdown, for the jobs' goroutines, until
// deadline, and reports whether they all returned: every script has been
// killed by then (Loop.Close), so this is how long the kernel takes to
// deliver SIGKILL and the waits to return; a script stuck in a file
// system that never answers may never die.
func (s *Server) waitJobs(deadline time.Time) bool { return waitUntil(&s.cgiWG, deadline) }
