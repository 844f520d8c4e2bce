package uring

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"
)

// --uring-fixed-files (Features.FixedFiles): connections as direct
// descriptors, io_uring's own table of files, one per ring.
//
// Each loop registers a sparse table (IORING_REGISTER_FILES2 with
// IORING_RSRC_REGISTER_SPARSE, Linux 5.19; registerFiles, sys_linux.go:
// giouring's RegisterFilesSparse returns no error when the kernel refuses)
// and its accept, multishot or not, puts each connection into a free slot
// of it (IORING_FILE_INDEX_ALLOC): the CQE's result is the slot, which is
// what conn.fd then holds. No fd is made in the process's table, which
// every thread of a Go process shares: an SQE that names a file by fd
// costs a lookup in that table and a reference taken and dropped on the
// file, where one that names it by slot (IOSQE_FIXED_FILE) costs an index
// into the ring's own table. queueAs marks every SQE of an op on the
// socket (directOps) so; the accept, the close (IORING_OP_CLOSE with
// file_index) and the shutdown (IORING_OP_SHUTDOWN) are below. Sockets
// in the table do not count against RLIMIT_NOFILE, but the table's size
// does (tableSize); the kernel allocates the table whole, a pointer and a
// bit a slot: about 550 KiB a loop at the default --max-conns.
//
// What needs a real fd, and what each does:
//
//   - Conn.Remote and Conn.Local (core.Server.WantsAddrs: the access log,
//     CGI, a PROXY header's trust check) come from getpeername and
//     getsockname, which take an fd; io_uring has no opcode for them on
//     Linux 6.18, and a multishot accept writes each peer's address over
//     the last one's in its one buffer. And core.Loop.NewConn wants the
//     peer's address (a PROXY header's sender is checked there). So an
//     accepted socket that admit takes first gets an fd by
//     IORING_OP_FIXED_FD_INSTALL (Linux 6.8; readAddrs), which the loop
//     asks both addresses of and closes at once (onAddrs); only then is
//     it a connection. Cost per connection: one SQE and CQE and a
//     close(2) beside the two calls every backend makes for these, and
//     it starts a pass later. An install that fails (the process is out
//     of fds) closes the socket unserved, counted in fd_install_fails:
//     serving it without the address the configuration asks for would
//     lose it silently.
//   - sendfile(2), the default body's carrier for a part in the page
//     cache, and getsockopt(SO_MEMINFO), which sizes a splice to the
//     socket's room (pipes.sockRoom: the cold window's bodies, and every
//     body with --uring-body=splice): the first of them a connection
//     makes asks for an fd (sysFd, opFdInstall), and its chain waits for
//     it (planNone); onFdInstall drives the connection again. The fd is
//     kept until the connection closes (queueClose closes it; no SQE
//     names it). Cost: one SQE and CQE and a close(2) per connection
//     that sends such a body, which also holds an fd in the table while
//     it lives; only those do. When no fd can be had, the part goes by
//     chunk (READ and SEND, which need none), and a splice is sized to
//     one default pipe ("the splice will tell"), counted in
//     fd_install_fails.
//   - shutdown(2) (a lingering close, a close with a chain in flight) is
//     made on the loop through the fd when the connection has one, else
//     by IORING_OP_SHUTDOWN on the slot, which the kernel always runs on
//     a worker (REQ_F_FORCE_ASYNC) and which looks the slot up only then:
//     as with issue 10's fd, the close must wait for its CQE, or the slot
//     could already hold the next accepted connection (armShutdown,
//     close). Cost: a worker's wake-up per such close; a Connection:
//     close with no input left to drain makes none.
//   - The other --uring-body modes need no fd: read and cold parts go by
//     READ of the file and SEND to the slot, view and view-zc by SEND
//     (SEND_ZC) to the slot; a splice's socket end is its out file, which
//     IOSQE_FIXED_FILE names.
//   - setsockopt: the loop makes none on a connection (TCP_NODELAY and
//     the like are set on the listener and inherited: backend/listen).
//     CGI takes the addresses only: its script reads pipes, never the
//     socket. --takeover shares the listeners' port; connections are
//     never handed over, a stopping server serves those it accepted.
//
// The listeners stay real fds. Probe requires FIXED_FD_INSTALL whatever
// the configuration, so that a kernel without it (before 6.8) is refused
// by name and --backend=auto falls back, instead of failing the first
// connection that needs an fd.

const (
	// opFixedFdInstall is IORING_OP_FIXED_FD_INSTALL (Linux 6.8), which
	// the pinned giouring does not know.
	opFixedFdInstall = 54
	// sqeFixedFile is IOSQE_FIXED_FILE.
	sqeFixedFile = giouring.SqeFixedFile
	// maxFixedFiles is IORING_MAX_FIXED_FILES, the largest table the
	// kernel registers.
	maxFixedFiles = 1 << 20
	// fixedSlack is how many slots the table has beyond --max-conns: an
	// accepted socket past it holds its slot until its close runs (a
	// pass later), and a multishot accept may take a listener's whole
	// backlog (net.core.somaxconn, 4096 by default) at once. A full
	// table fails the accept with ENFILE, which pauses accepting.
	fixedSlack = 4096
)

// directSockets are connections as direct descriptors (sockets,
// socket_linux.go): conn.fd is the slot, and fds holds, by conn slot, the
// fd installed for the system calls, or one of sysFdNone,
// sysFdInstalling, sysFdNoMore.
type directSockets struct {
	fds []int32
	// addrs counts the accepted sockets admit took whose addresses are
	// being read (readAddrs): each becomes a connection at its CQE.
	addrs int
}

// The values directSockets.fds takes besides an fd.
const (
	sysFdNone       = -1 // none yet: sysFd installs one
	sysFdInstalling = -2 // a FIXED_FD_INSTALL is in flight
	sysFdNoMore     = -3 // an install failed: the fallbacks go without
)

// directOps are the ops whose SQE names the connection's socket by its fd
// field: with --uring-fixed-files that field is the slot, and the SQE is
// marked IOSQE_FIXED_FILE. Not the close (its slot goes in file_index, and
// the kernel refuses the flag there), not the accept (its fd is the
// listener's), nor the reads and splices of a file or a pipe.
var directOps = [...]op{opRecv, opSend, opSendSkipped, opSendZC, opBodyOut, opBodyOutZC, opBodyPoll, opResetPoll, opShutdown, opFdInstall, opAddrs}

// tableSize is how many direct descriptors a loop registers: the
// connections --max-conns allows, fixedSlack more, and at most what the
// kernel takes: IORING_MAX_FIXED_FILES, and RLIMIT_NOFILE, which it checks
// the size against (the Go runtime raises the soft limit to the hard one
// at start).
func tableSize(maxConns int) uint32 {
	n := min(maxConns+fixedSlack, maxFixedFiles)
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < uint64(n) { // uncounted: setup
		n = int(rl.Cur)
	}
	return uint32(max(n, 1))
}

// setUpFixedFiles registers a sparse table of n direct descriptors with
// the ring and checks the opcode that gives a connection a real fd. Its
// errors name the kernel that has what is missing.
func (r *ring) setUpFixedFiles(n uint32) error {
	if errno := r.registerFiles(n); errno != 0 {
		return refuseFixedFiles("IORING_REGISTER_FILES2 with IORING_RSRC_REGISTER_SPARSE", errno)
	}
	p, err := r.GetProbeRing() // uncounted: setup
	if err != nil || !p.IsSupported(opFixedFdInstall) {
		return refuseFixedFiles("IORING_OP_FIXED_FD_INSTALL", unix.EINVAL)
	}
	return nil
}

// refuseFixedFiles says what the kernel refused: the table (Linux 5.19),
// or the fd install (Linux 6.8); or, for EMFILE, the fd limit.
func refuseFixedFiles(what string, errno unix.Errno) error {
	switch {
	case errno == unix.EMFILE:
		return fmt.Errorf("io_uring_register(%s): EMFILE: the table of direct descriptors is larger than the fd limit (ulimit -n) allows: raise it, or lower --max-conns: %w", what, errors.ErrUnsupported)
	case what == "IORING_OP_FIXED_FD_INSTALL":
		return fmt.Errorf("io_uring lacks opcode %s: --uring-fixed-files needs Linux 6.8 (it gives a connection the fd that sendfile(2) and getpeername take): %w", what, errors.ErrUnsupported)
	}
	return fmt.Errorf("io_uring_register(%s): %v: --uring-fixed-files needs Linux 5.19: %w", what, errno, errors.ErrUnsupported)
}

// setUpDirect registers the loop's table and marks the socket ops
// (directOps): the loop's part of Setup.
func (l *loop) setUpDirect() error {
	if err := l.ring.setUpFixedFiles(tableSize(l.srv.Config.MaxConns)); err != nil {
		return err
	}
	d := &directSockets{}
	l.sock = d
	d.setOps(l.ops)
	for _, o := range directOps {
		l.sockFlags[o] = sqeFixedFile
	}
	return nil
}

// setOps sets the handlers of the ops only direct descriptors queue.
func (d *directSockets) setOps(t *opTable) {
	t.loop[opAddrs] = func(l *loop, _ op, _, slot uint32, res int32, flags uint32) {
		l.ended(flags)
		d.onAddrs(l, int(slot), res)
	}
	t.loop[opCloseDirect] = func(l *loop, _ op, _, _ uint32, _ int32, flags uint32) { l.ended(flags) }
	t.conn[opShutdown] = func(_ *loop, cn *conn, _ int32, _ uint32) { cn.armd &^= armShutdown }
	t.conn[opFdInstall] = func(l *loop, cn *conn, res int32, _ uint32) { d.onFdInstall(l, cn, res) }
}

// prepAccept prepares listener fd's accept into a free slot of the
// table (io_uring_prep_multishot_accept_direct(3), or with
// Backend.OneShot io_uring_prep_accept_direct(3) with
// IORING_FILE_INDEX_ALLOC). The kernel refuses SOCK_CLOEXEC for a direct
// descriptor, which no exec can inherit anyway.
func (*directSockets) prepAccept(l *loop, e *giouring.SubmissionQueueEntry, fd int) {
	if l.cfg.OneShot {
		e.PrepareAcceptDirect(fd, 0, 0, unix.SOCK_NONBLOCK, giouring.FileIndexAlloc)
	} else {
		e.PrepareMultishotAcceptDirect(fd, 0, 0, unix.SOCK_NONBLOCK)
	}
}

// admit: with core.Server.WantsAddrs the addresses are read first
// (readAddrs), and newConn follows at its CQE.
func (d *directSockets) admit(l *loop, slot int) {
	if l.srv.WantsAddrs() {
		d.readAddrs(l, slot)
		return
	}
	l.newConn(slot, netip.AddrPort{}, netip.AddrPort{})
}

func (d *directSockets) pending() int { return d.addrs }

// takeQueued: none, the connections are accepted through the ring.
func (*directSockets) takeQueued(*loop, *listener) {}

func (*directSockets) acceptHint(errno unix.Errno) string {
	if errno != unix.ENFILE {
		return ""
	}
	return fmt.Sprintf(" (the loop's table of direct descriptors is full: it has --max-conns plus %d slots, at most ulimit -n)", fixedSlack)
}

// closeAccepted closes the slot of an accepted socket that no
// connection holds (refused past --max-conns, or dropped at teardown);
// what the ring's teardown finds still in the table it closes itself.
func (*directSockets) closeAccepted(l *loop, slot int) {
	e := l.sqe()
	e.PrepareCloseDirect(uint32(slot)) // io_uring_prep_close_direct(3)
	l.queue(e, opCloseDirect, nil)
}

// install queues IORING_OP_FIXED_FD_INSTALL of cn's slot (no helper in
// the pinned giouring: liburing's io_uring_prep_fixed_fd_install(3)): its
// CQE's result is a new fd, O_CLOEXEC (install_fd_flags 0), for the same
// socket. queueAs adds IOSQE_FIXED_FILE, which the op requires.
func (d *directSockets) install(l *loop, cn *conn) {
	e := l.sqe()
	e.OpCode = opFixedFdInstall
	e.Fd = int32(cn.fd)
	l.queue(e, opFdInstall, cn)
	d.fds[cn.slot] = sysFdInstalling
}

// opened: a new connection has no fd yet.
func (d *directSockets) opened(cn *conn) {
	for int(cn.slot) >= len(d.fds) {
		d.fds = append(d.fds, sysFdNone)
	}
	d.fds[cn.slot] = sysFdNone
}

// sysFd: the first call asks for an fd (install) and reports wait: the
// caller queues nothing, and onFdInstall's CQE drives the connection
// again.
func (d *directSockets) sysFd(l *loop, cn *conn) (fd int, wait bool) {
	switch d.fds[cn.slot] {
	case sysFdNone:
		d.install(l, cn)
		return -1, true
	case sysFdInstalling:
		return -1, true
	}
	return int(d.fds[cn.slot]), false
}

func (d *directSockets) fdOf(cn *conn) int { return int(max(d.fds[cn.slot], -1)) }

// onFdInstall: the fd sysFd asked for, kept until the close.
func (d *directSockets) onFdInstall(l *loop, cn *conn, res int32) {
	switch {
	case res < 0:
		l.stats.Own[ownFdInstallFails]++
		d.fds[cn.slot] = sysFdNoMore
	case cn.life >= lifeClosing:
		l.stats.Own[ownFdInstalls]++
		l.sys.Close(int(res))
		d.fds[cn.slot] = sysFdNoMore
	default:
		l.stats.Own[ownFdInstalls]++
		d.fds[cn.slot] = res
	}
}

// readAddrs asks for an fd of accepted socket slot, which admit took, for
// its addresses (io_uring_prep_fixed_fd_install(3), as install does): it
// becomes a connection at the CQE (onAddrs).
func (d *directSockets) readAddrs(l *loop, slot int) {
	e := l.sqe()
	e.OpCode = opFixedFdInstall
	e.Fd = int32(slot)
	l.queueAs(e, opAddrs, 0, uint32(slot))
	d.addrs++
}

// onAddrs: the fd readAddrs asked for, whose two ends are read before it
// is closed; the socket then becomes a connection with them. Without an
// fd (the process is out of them) the socket is closed unserved: the
// configuration asks for an address it cannot have. At Teardown
// (wake.off) it is closed too, as dropAccepted closes the others.
func (d *directSockets) onAddrs(l *loop, slot int, res int32) {
	d.addrs--
	if res < 0 {
		l.stats.Own[ownFdInstallFails]++
		d.closeAccepted(l, slot)
		return
	}
	l.stats.Own[ownFdInstalls]++
	fd := int(res)
	remote, local := l.sys.Addrs(l.srv, fd)
	l.sys.Close(fd)
	if l.wake.off {
		d.closeAccepted(l, slot)
		return
	}
	l.newConn(slot, remote, local)
}

// shutdown is shutdown(2) through the installed fd when cn has one, else
// IORING_OP_SHUTDOWN on its slot (io_uring_prep_shutdown(3)), counted in
// flight: close waits for its CQE (armShutdown).
func (d *directSockets) shutdown(l *loop, cn *conn, how int) {
	if fd := d.fds[cn.slot]; fd >= 0 {
		l.sys.Shutdown(int(fd), how)
		return
	}
	e := l.sqe()
	e.PrepareShutdown(cn.fd, how)
	l.queue(e, opShutdown, cn)
	cn.armd |= armShutdown
}

// closeWaits: an IORING_OP_SHUTDOWN of cn's slot is in flight.
func (*directSockets) closeWaits(cn *conn) bool { return cn.armd&armShutdown != 0 }

// prepClose makes e the close of cn's slot (io_uring_prep_close_direct(3)),
// and closes the fd installed for it, if any, on the loop: no SQE names
// that one.
func (d *directSockets) prepClose(l *loop, e *giouring.SubmissionQueueEntry, cn *conn) {
	e.PrepareCloseDirect(uint32(cn.fd))
	d.closeLeft(l, cn)
}

// closeLeft closes the fd installed for cn, if one is; the slot goes
// with the ring.
func (d *directSockets) closeLeft(l *loop, cn *conn) {
	if fd := d.fds[cn.slot]; fd >= 0 {
		l.sys.Close(int(fd))
		d.fds[cn.slot] = sysFdNoMore
	}
}
