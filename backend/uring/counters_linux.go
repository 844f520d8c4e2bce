package uring

import "github.com/twinloop/twinloop/core"

// The counters only io_uring keeps, by their index into core.Stats.Own;
// the loop adds to them in place, each where what it counts happens.
const (
	ownSQEs   = iota // submission entries the kernel took (ring.enter)
	ownCQEs          // completions reaped
	ownEnters        // io_uring_enter calls: Syscalls' count (FromSyscall), under a name of io_uring's in /metrics; its slot stays 0
	// ownBodyFallbacks counts the file bodies sent by read + send
	// because the pipe budget was spent; ownBodyCold, because their next
	// part was not in the page cache; ownBodyViews, the chains of file
	// body sent from the File's shared read-only mapping
	// (core.Conn.BodyView) instead of read into a chunk of the
	// connection's own.
	ownBodyFallbacks
	ownBodyCold
	ownBodyViews
	// Gauges: the accepted sockets that wait for a pass to admit them,
	// and the body carriers that exist now, made on demand and closed
	// when unused for a second, with the bytes they hold (a chunk's
	// mapping, a pipe's capacity).
	ownAcceptQueued
	ownChunks
	ownChunkBytes
	ownPipes
	ownPipeBytes
	// ownSendsSkipped counts the header sends made with
	// IOSQE_CQE_SKIP_SUCCESS (--uring-skip-send): each saved a CQE
	// unless it failed.
	ownSendsSkipped
	// ownRecvBufBytes is the memory of the provided buffers the recvs
	// take (bufCount × bufSize; with --uring-buf-inc incBufCount ×
	// incBufSize), set at setup.
	ownRecvBufBytes
	// ownZCSends counts the zero-copy sends (--uring-send-zc,
	// --uring-body=view-zc), ownZCCopied those whose notification said
	// the kernel copied the bytes after all (loopback does:
	// sendzc_linux.go). Gauges: ownZCPending, the notifications still to
	// come; ownZCHeld, the Files they hold.
	ownZCSends
	ownZCCopied
	ownZCPending
	ownZCHeld
	// ownFdInstalls counts the fds installed for a direct descriptor's
	// system calls (--uring-fixed-files: its addresses, sendfile,
	// getsockopt), ownFdInstallFails the installs the kernel refused
	// (the process was out of fds; fixedfd_linux.go says what each case
	// then does).
	ownFdInstalls
	ownFdInstallFails
	// ownRecvNoBufs counts the recvs that ended because the provided
	// buffer ring was dry (ENOBUFS), each re-armed with its data waiting
	// in the socket; ownCQOverflows, the passes that found completions the
	// CQ had no room for on the kernel's overflow list
	// (IORING_SQ_CQ_OVERFLOW). Both say whether bufCount and the CQ's size
	// (ringEntries) are enough for the load.
	ownRecvNoBufs
	ownCQOverflows
	// ownCQReadyPeak is the most completions a pass found ready at once:
	// what the CQ needs room for (ringEntries).
	ownCQReadyPeak
)

// counters says what each is. Operators scrape these names and scripts
// read these keys (labrun -strace, c10k-rss.steps): they stay
// as they are.
var counters = [...]core.Counter{
	ownSQEs:   {Key: "sqes", Metric: "uring_sqes_total", Help: "io_uring submission queue entries handed to the kernel."},
	ownCQEs:   {Key: "cqes", Metric: "uring_cqes_total", Help: "io_uring completions reaped."},
	ownEnters: {Metric: "uring_enters_total", Help: "io_uring_enter calls.", FromSyscall: true, Syscall: core.SysUringEnter}, // the line has io_uring_enter=
	ownBodyFallbacks: {Key: "body_fallbacks", Metric: "uring_body_fallbacks_total",
		Help: "File bodies sent by read + send because the pipe budget was spent (raise fs.pipe-user-pages-soft)."},
	ownBodyCold: {Key: "body_cold", Metric: "uring_body_cold_total",
		Help: "File bodies sent by read + send because their next part was not in the page cache (a splice would hold an io_uring worker while the disk reads)."},
	ownBodyViews: {Key: "body_views", Metric: "uring_body_view_sends_total",
		Help: "Parts of file bodies sent from the file's shared read-only mapping (copied once by the kernel, no buffer per connection) because no pipe was to be had."},
	ownAcceptQueued: {Key: "accept_queued", Metric: "uring_accept_queued", Gauge: true,
		Help: "Accepted sockets waiting for a pass of the loop to admit them (io_uring admits 128 a pass; as of the loop's last tick)."},
	ownChunks:     {Key: "chunks", Metric: "uring_chunks", Gauge: true, Help: "io_uring body chunks mapped now (read + send bodies)."},
	ownChunkBytes: {Key: "chunk_bytes", Metric: "uring_chunk_bytes", Gauge: true, Help: "Bytes of the io_uring body chunks mapped now."},
	ownPipes:      {Key: "pipes", Metric: "uring_pipes", Gauge: true, Help: "io_uring body pipes open now (splice bodies)."},
	ownPipeBytes:  {Key: "pipe_bytes", Metric: "uring_pipe_bytes", Gauge: true, Help: "Capacity of the io_uring body pipes open now."},
	ownSendsSkipped: {Key: "sends_skipped", Metric: "uring_sends_skipped_total",
		Help: "Response headers sent with IOSQE_CQE_SKIP_SUCCESS (--uring-skip-send): no completion unless they failed."},
	ownRecvBufBytes: {Key: "recv_buf_bytes", Metric: "uring_recv_buf_bytes", Gauge: true,
		Help: "Bytes of the io_uring provided buffers the recvs take (mapped at setup, touched as used)."},
	ownZCSends: {Key: "zc_sends", Metric: "uring_zc_sends_total",
		Help: "Zero-copy sends (IORING_OP_SEND_ZC, SENDMSG_ZC: --uring-send-zc, --uring-body=view-zc)."},
	ownZCCopied: {Key: "zc_copied", Metric: "uring_zc_copied_total",
		Help: "Zero-copy sends whose bytes the kernel copied after all (IORING_NOTIF_USAGE_ZC_COPIED, Linux 6.2; every one on loopback)."},
	ownZCPending: {Key: "zc_pending", Metric: "uring_zc_pending", Gauge: true,
		Help: "Zero-copy sends whose notification has not come: their memory is still the kernel's."},
	ownZCHeld: {Key: "zc_held", Metric: "uring_zc_held_files", Gauge: true,
		Help: "Cached files held open and mapped by zero-copy sends until their notification."},
	ownFdInstalls: {Key: "fd_installs", Metric: "uring_fd_installs_total",
		Help: "fds installed for a direct descriptor's system calls (--uring-fixed-files: its addresses, sendfile, getsockopt)."},
	ownFdInstallFails: {Key: "fd_install_fails", Metric: "uring_fd_install_fails_total",
		Help: "fd installs for a direct descriptor that failed (the process was out of fds: raise ulimit -n)."},
	ownRecvNoBufs: {Key: "recv_nobufs", Metric: "uring_recv_nobufs_total",
		Help: "io_uring recvs ended because the provided buffer ring was empty (ENOBUFS), each re-armed."},
	ownCQOverflows: {Key: "cq_overflows", Metric: "uring_cq_overflow_passes_total",
		Help: "Passes of an io_uring loop that found completions on the kernel's overflow list because the completion queue was full."},
	ownCQReadyPeak: {Key: "cq_ready_peak", Metric: "uring_cq_ready_peak", Gauge: true,
		Help: "The most io_uring completions one pass of a loop found ready at once since the start (summed over the loops): what the completion queue needs room for."},
}

// Counters describes io_uring's own counters (core.Backend).
func (*Backend) Counters() []core.Counter { return counters[:] }
