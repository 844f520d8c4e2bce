package core

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// What a CGI script started ends with it, daemonized or not, so that its
// answer ends with its output (nothing it left behind keeps the stdout
// pipe open) and --cgi-max counts what really runs.
//
// Killing the script's process group misses whatever called setsid or
// setpgid (daemon(3), setsid(1), a shell's job control), and once the
// script has exited nothing ties those to it: their parent is gone, and
// they have moved to init. So the process is a child subreaper
// (PR_SET_CHILD_SUBREAPER): every orphan in a script's tree is adopted by
// the server instead of init, where a sweep finds it among the server's
// children (/proc/self/task/PID/children) once its script has exited, kills
// it and reaps it. Each script starts a session of its own (Setsid), which
// its descendants keep unless they start one in turn, so an adopted
// process is a script's when:
//
//   - its session is the script's, or that of something the sweep already
//     found to be the script's (the classic double fork: the daemon's
//     session leader is gone, the session is not);
//   - it, or one of its descendants, holds the script's stdout or stdin
//     pipe: the case that holds an answer up;
//   - else it left its script's session and closed the pipes, and only
//     timing is left: it is counted to every script that ran when it was
//     first found and had started by the time it did, and killed by the
//     sweep of the last of them. A daemon of a script that runs alone ends
//     with it; with others side by side, at the latest with the last of
//     them, each bounded by --cgi-timeout. A running script's own daemon
//     is never killed by another's exit. (Nor is a process that had
//     started before every running script; one from elsewhere that the
//     server adopts, as a container's PID 1 adopts every orphan, and
//     that started while scripts ran, is counted to them too.)
//
// Adopted processes in the server's own session are not a script's (no
// script's descendant can join it) and are left alone, as are the scripts
// themselves, which their jobs reap with exec.Cmd.Wait: a sweep waits for
// specific pids only, never for any child, and a script counts as one
// until its job has reaped it. A dead child outside the server's session
// is reaped as an orphan: the server starts no children but scripts.
//
// The alternatives: a cgroup per script (clone3 into it, cgroup.kill)
// knows every descendant exactly, but a server can make cgroups only where
// its own is delegated to it (root, or systemd's Delegate=), not for a
// login session nor in most containers, so a complete fallback would be
// needed anyway, and one mechanism is tested on every machine. A PID
// namespace per script kills its whole tree when the script exits, but
// needs privileges or user namespaces and makes $$ be 1. A wrapper process
// that is a subreaper per script would attribute exactly too, but there is
// no such binary to run, and os/exec runs no code between fork and exec.
//
// All of it runs on the jobs' goroutines, never on a loop's thread: its
// system calls are not counted in Stats.

// sweep is the process's, not a Server's: being a subreaper is a property
// of the process, and an adopted orphan may come from any Server's script.
var sweep = sweeper{
	scripts: map[int]*scriptProc{},
	strays:  map[int]*stray{},
	claimed: map[int]bool{},
}

type sweeper struct {
	once sync.Once
	err  error
	sid  int // the server's session; immutable after init

	// Starts hold forks shared from before the fork until the script is
	// registered, a sweep's round holds it exclusively: no round meets a
	// script that is not yet known, which it would take for an orphan in
	// a session of its own (one forked on the main thread is in the list a
	// round reads). Starts still fork side by side, as os/exec lets them.
	forks sync.RWMutex

	mu      sync.Mutex
	scripts map[int]*scriptProc // by pid: forked and not yet reaped
	strays  map[int]*stray      // adopted processes that could not be told whose they are
	claimed map[int]bool        // killed by a sweep, which reaps them
}

// scriptProc is a script the sweeper knows of.
type scriptProc struct {
	pid      int
	start    uint64       // its start time (/proc/PID/stat), in clock ticks since boot
	pipes    [2]uint64    // inodes of its stdout and stdin pipes (0: none)
	sessions map[int]bool // its own session, and those of what it left that a sweep found to be its; guarded by sweeper.mu
}

// stray is an adopted process first found in a session of its own.
type stray struct {
	// The scripts that may have started it; once none is left, it is
	// killed. nil: none had started by the time it did, so it is not a
	// script's, and it is left alone.
	owners map[*scriptProc]bool
}

const (
	sweepRounds = 32                     // rounds of a sweep: each kills what the last one's victims left to the server
	sweepWait   = 2 * time.Second        // how long a sweep waits for its victims to die, all rounds together
	sweepPoll   = 50 * time.Millisecond  // the longest pause between checks whether they did
	sweepFirst  = 100 * time.Microsecond // the first one
)

// init makes the process a child subreaper, once: before a script runs,
// so that no orphan of one escapes to init.
func (s *sweeper) init() error {
	s.once.Do(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil { // uncounted: a job goroutine's sweep, not a loop's
			s.err = os.NewSyscallError("prctl(PR_SET_CHILD_SUBREAPER)", err)
			return
		}
		s.sid, s.err = unix.Getsid(0) // uncounted: a job goroutine's sweep, not a loop's
		if s.err != nil {
			s.err = os.NewSyscallError("getsid", s.err)
		}
	})
	return s.err
}

// start starts cmd, a script, and registers it, holding forks (see
// sweeper) across the exec too, which os/exec waits for: a script
// directory that hangs the exec holds up the other scripts' sweeps, but
// would hold up their starts anyway.
func (s *sweeper) start(cmd *exec.Cmd, pipes [2]uint64) (*scriptProc, error) {
	s.forks.RLock()
	defer s.forks.RUnlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	st, _ := readProcStat(pid) // the script is at least a zombie: it cannot fail
	p := &scriptProc{pid: pid, start: st.start, pipes: pipes, sessions: map[int]bool{pid: true}}
	s.mu.Lock()
	s.scripts[pid] = p
	s.mu.Unlock()
	return p, nil
}

// end kills and reaps what script p left, once p has exited (it is a
// zombie, so its pid is still its own), then reaps p with reap
// (exec.Cmd.Wait), and forgets it: p's place in --cgi-max may go then.
//
// A victim's children are adopted when it dies, so each round waits for
// the last one's victims before it looks again, until a round finds none.
// p is forgotten under the same lock as that last round: no stray first
// found in between counts p among its owners after p's last look. SIGKILL
// takes effect at once but for a process stuck in the kernel (a hung NFS
// mount): the sweep gives up on those after sweepWait, and a later one
// reaps them.
func (s *sweeper) end(p *scriptProc, reap func() error) error {
	deadline := time.Now().Add(sweepWait)
	for n := 1; ; n++ {
		s.forks.Lock()
		s.mu.Lock()
		victims := s.round(p)
		last := len(victims) == 0 || n == sweepRounds
		var err error
		if last {
			err = s.forget(p, reap)
		}
		s.mu.Unlock()
		s.forks.Unlock()
		done := s.reap(victims, deadline)
		switch {
		case last:
			return err
		case !done:
			s.mu.Lock()
			err = s.forget(p, reap)
			s.mu.Unlock()
			return err
		}
	}
}

// forget reaps p and forgets it. A stray p was the last possible owner
// of, which only a sweep cut short leaves, is killed now, and reaped by a
// later sweep. Called with s.mu held.
func (s *sweeper) forget(p *scriptProc, reap func() error) error {
	err := reap() // p is a zombie: this does not wait
	delete(s.scripts, p.pid)
	for pid, x := range s.strays {
		if !x.owners[p] {
			continue
		}
		if delete(x.owners, p); len(x.owners) == 0 {
			unix.Kill(pid, unix.SIGKILL) // uncounted: a job goroutine's sweep, not a loop's
			delete(s.strays, pid)
		}
	}
	return err
}

// round looks at the server's children once, kills those that are p's,
// claims those and the dead ones, and returns their pids, which the
// caller reaps. Called with s.forks and s.mu held.
func (s *sweeper) round(p *scriptProc) (victims []int) {
	for _, pid := range serverChildren() {
		if s.scripts[pid] != nil || s.claimed[pid] {
			continue
		}
		st, err := readProcStat(pid)
		// In the server's session, or in session 0 (one whose leader is
		// outside the server's PID namespace): not a script's.
		if err != nil || st.session == s.sid || st.session <= 0 {
			continue
		}
		if st.state != 'Z' {
			if !s.owns(p, pid, &st) {
				continue
			}
			p.sessions[st.session] = true
			if st.pgrp > 1 { // kill(-1) would be every process, kill(0) the server's group
				// Its group is in its session, which is p's: all of it is.
				unix.Kill(-st.pgrp, unix.SIGKILL) // uncounted: a job goroutine's sweep, not a loop's
			}
			unix.Kill(pid, unix.SIGKILL) // uncounted: a job goroutine's sweep, not a loop's
		}
		// p's, or dead already, whosever it was: reaped here.
		delete(s.strays, pid)
		s.claimed[pid] = true
		victims = append(victims, pid)
	}
	return victims
}

// owns reports whether adopted process pid (st) is to die with p, which
// has exited. Called with s.mu held.
func (s *sweeper) owns(p *scriptProc, pid int, st *procStat) bool {
	for _, q := range s.scripts {
		if q.sessions[st.session] {
			return q == p
		}
	}
	x := s.strays[pid]
	if x == nil {
		x = &stray{}
		for _, q := range s.scripts {
			if q.start <= st.start {
				if x.owners == nil {
					x.owners = map[*scriptProc]bool{}
				}
				x.owners[q] = true
			}
		}
		s.strays[pid] = x
	}
	if !x.owners[p] {
		return false // it was there before p, or had been counted out of p's already
	}
	if holdsPipe(pid, p.pipes) {
		return true
	}
	delete(x.owners, p)
	return len(x.owners) == 0
}

// reap waits until the deadline at most for the victims of a round to
// die, reaps them, and reports whether all did. They are the server's
// children and no one else waits for them: wait4 for each pid, never for
// any child. One still there at the deadline is left to a later sweep,
// which finds it dead.
func (s *sweeper) reap(victims []int, deadline time.Time) bool {
	pause := sweepFirst
	for len(victims) > 0 {
		left := victims[:0]
		for _, pid := range victims {
			var ws unix.WaitStatus
			n, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil) // uncounted: a job goroutine's sweep, not a loop's
			if err == unix.EINTR || err == nil && n == 0 {
				left = append(left, pid)
				continue
			}
			s.mu.Lock()
			delete(s.claimed, pid)
			s.mu.Unlock()
		}
		victims = left
		if len(victims) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(pause)
		pause = min(2*pause, sweepPoll)
	}
	if len(victims) == 0 {
		return true
	}
	s.mu.Lock()
	for _, pid := range victims {
		delete(s.claimed, pid)
	}
	s.mu.Unlock()
	return false
}

// serverChildren lists the orphans the process adopted, among others of
// its children. The kernel gives an orphan to the subreaper's first live
// thread (kernel/exit.c, find_new_reaper), which is the thread group
// leader: in Go the main thread never exits. So one list is read, not one
// per thread (the scripts, children of whichever thread forked them,
// need not be listed). A kernel without CONFIG_PROC_CHILDREN has no such
// list, and then every process's parent is read instead.
func serverChildren() []int {
	self := os.Getpid()
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(self) + "/children")
	if err != nil {
		return childrenByParent(self)
	}
	var pids []int
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// childrenByParent lists the processes whose parent is ppid, from every
// process's /proc/PID/stat: what serverChildren does without the
// children files, at the cost of reading them all.
func childrenByParent(ppid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(pid); err == nil && st.ppid == ppid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procStat is what a sweep reads of a process in /proc/PID/stat (proc(5)).
type procStat struct {
	state   byte
	ppid    int
	pgrp    int
	session int
	start   uint64
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// The command name, in parentheses, may hold anything: the fields
	// start after its last ')'. From there: state (3), ppid (4), pgrp
	// (5), session (6), ... starttime (22).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	st := procStat{state: f[0][0]}
	st.ppid, _ = strconv.Atoi(string(f[1]))
	st.pgrp, _ = strconv.Atoi(string(f[2]))
	st.session, _ = strconv.Atoi(string(f[3]))
	st.start, _ = strconv.ParseUint(string(f[19]), 10, 64)
	return st, nil
}

// holdsPipe reports whether process pid or one of its descendants has a
// pipe with one of the inodes open.
func holdsPipe(pid int, inodes [2]uint64) bool {
	var want [2]string
	for i, ino := range inodes {
		if ino != 0 {
			want[i] = "pipe:[" + strconv.FormatUint(ino, 10) + "]"
		}
	}
	todo := []int{pid}
	for n := 0; len(todo) > 0 && n < 256; n++ { // a bound, against a fork bomb
		pid, todo = todo[0], todo[1:]
		dir := "/proc/" + strconv.Itoa(pid)
		fds, _ := os.ReadDir(dir + "/fd")
		for _, fd := range fds {
			if l, err := os.Readlink(dir + "/fd/" + fd.Name()); err == nil && l != "" && (l == want[0] || l == want[1]) {
				return true
			}
		}
		tasks, _ := os.ReadDir(dir + "/task")
		for _, t := range tasks {
			b, _ := os.ReadFile(dir + "/task/" + t.Name() + "/children")
			for _, f := range bytes.Fields(b) {
				if c, err := strconv.Atoi(string(f)); err == nil {
					todo = append(todo, c)
				}
			}
		}
	}
	return false
}

// pipeInode returns the inode of pipe fd, 0 if fstat fails.
func pipeInode(fd int) uint64 {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil { // uncounted: a job goroutine's sweep, not a loop's
		return 0
	}
	return st.Ino
}
