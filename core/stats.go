package core

import (
	"fmt"
	"strings"
)

// Sys names a kind of system call, for counting, by the name strace gives
// it. Every call a loop's thread makes is counted where it is made, in the
// thin wrappers that make it (backend/internal/loops/sys_linux.go, the
// backends' sys_linux.go, core/sys_linux.go), so that no call site can
// forget one; TestSyscallsCountedInWrappers keeps it so.
type Sys uint8

const (
	SysRead Sys = iota
	SysWrite
	SysSendto
	SysSendfile
	SysEpollWait
	SysEpollCtl
	SysAccept
	SysClose
	SysShutdown
	SysUringEnter
	SysOpen
	SysFstat
	SysPread
	SysPipe       // pipe2 for a CGI script's output, or for io_uring file bodies
	SysKill       // kill of a CGI script's process group
	SysFcntl      // fcntl: a CGI script's pipe made blocking, an io_uring body pipe resized, the fd of a body on a mount that is not local duplicated for its revalidation's read
	SysPoll       // ppoll: the poll backend's wait; the blocking backend's of its listeners (several)
	SysSetsockopt // setsockopt at setup (blocking backend: its timeouts); TCP_CORK (epoll's --epoll-cork ablation); SO_LINGER (io_uring: a connection cut short with zero-copy sends out)
	SysGetsockopt // getsockopt: io_uring's look at a socket's send buffer before a splice
	SysRecvfrom   // recvfrom with MSG_PEEK: the blocking backend's look for unread input
	SysGetpeername
	SysGetsockname // the two ends of a connection, when the access log or CGI wants them
	SysGetdents    // getdents64: an --autoindex listing
	SysMmap        // io_uring: a file body's chunk or a CGI read's buffer, made on demand; a cached memory body; a File's view
	SysMunmap
	SysCachestat // cachestat(2): whether a body's next part is in the page cache (io_uring before it takes a pipe, epoll before a sendfile chunk)
	SysWritev    // epoll: pipelined responses with bodies referenced from the cache, in one call
	SysSendmsg   // epoll: the same, followed by a file body (MSG_MORE)
	NumSys
)

var sysNames = [NumSys]string{
	SysRead: "read", SysWrite: "write", SysSendto: "sendto", SysSendfile: "sendfile",
	SysEpollWait: "epoll_wait", SysEpollCtl: "epoll_ctl",
	SysAccept: "accept4", SysClose: "close", SysShutdown: "shutdown",
	SysUringEnter: "io_uring_enter", SysOpen: "openat2",
	SysFstat: "fstat", SysPread: "pread", SysPipe: "pipe2", SysKill: "kill", SysFcntl: "fcntl",
	SysPoll: "ppoll", SysSetsockopt: "setsockopt", SysGetsockopt: "getsockopt",
	SysRecvfrom: "recvfrom", SysGetpeername: "getpeername", SysGetsockname: "getsockname",
	SysGetdents: "getdents64", SysMmap: "mmap", SysMunmap: "munmap", SysCachestat: "cachestat",
	SysWritev: "writev", SysSendmsg: "sendmsg",
}

func (s Sys) String() string { return sysNames[s] }

// Stats are one loop's counters. The loop increments them with plain
// adds (no atomics, no locks: only the loop's thread writes them) and
// publishes a copy once per tick; Server.Stats sums the published copies.
type Stats struct {
	Accepts   uint64
	Closes    uint64
	Requests  uint64
	Status    [6]uint64 // responses by class: Status[2] counts 2xx
	BytesIn   uint64
	BytesOut  uint64
	Timeouts  uint64
	Refused   uint64 // connections closed at accept because of --max-conns
	Syscalls  [NumSys]uint64
	CacheHits uint64
	CacheMiss uint64

	// LogDropped counts access log lines dropped because the log's
	// writer was stuck (a full disk, a hung file system, a pipe nobody
	// reads) while the loop's buffer grew to logBufMax (accesslog.go).
	LogDropped uint64

	// Memory held now (gauges, not counters; issue 20). BufBytes is the
	// capacity of the live connections' input and output buffers, kept up
	// to date by each Conn as its buffers grow (Conn.account), never by
	// walking them. BodyRefs and BodyRefBytes are the cached memory
	// bodies that queued responses reference instead of copying (one per
	// response: a body two connections send counts twice, its memory
	// once).
	BufBytes int64
	// ConnsPeak is the most Conns the loop had open at once since it
	// started: what its connection memory peaked with (Add sums the
	// loops' peaks, which may not have come at once: --stats' figure is a
	// bound, /metrics has each loop's).
	ConnsPeak    int64
	BodyRefs     int64
	BodyRefBytes int64
	FS           FSStats // file-system operations
	// Proxy counts the PROXY protocol headers expected
	// (Config.ProxyProtocol), by what became of them: taken, or the
	// connection closed unserved, and why.
	Proxy [NumProxyResults]uint64
	// BadTransitions counts the moves between connection states that the
	// core's table does not allow (Conn.to): a bug, always zero in tests.
	BadTransitions uint64

	// Own are the counters that only the loop's backend keeps (io_uring's
	// SQEs, epoll's read-aheads), by the backend's own index, as Syscalls
	// are by Sys: Own[i] is OwnCounters[i]. The loop adds to them in
	// place, so that Tick publishes them with the rest at no cost of its
	// own, and a counter one backend keeps is no field of the others'.
	// OwnCounters is the backend's table (Backend.Counters), set by each
	// of its loops before they serve; every copy shares it, none writes it.
	Own         [NumOwn]int64
	OwnCounters []Counter
}

// NumOwn is the room in Stats.Own for a backend's own counters: io_uring
// keeps twenty-two.
const NumOwn = 22

// A Counter describes one of a backend's own counters (Stats.Own): what
// it is, and how Stats.String and the Prometheus metrics show it.
type Counter struct {
	// Key names it in Stats.String's line, which shows it when it is not
	// zero. Empty, it is a series in /metrics only.
	Key string
	// Metric names its series in /metrics, after the twinloop_ prefix.
	Metric string
	Help   string
	// Gauge says it is a value now, which falls as well as rises, not a
	// total since the loop started.
	Gauge bool
	// FromSyscall says the series shows Stats.Syscalls[Syscall], a count
	// the Stats keep already, under the backend's own name; its slot in
	// Own stays unused, so that the loop counts the call once.
	FromSyscall bool
	Syscall     Sys
}

// Value is c's value in s, c being s.OwnCounters[i].
func (c Counter) Value(s *Stats, i int) int64 {
	if c.FromSyscall {
		return int64(s.Syscalls[c.Syscall])
	}
	return s.Own[i]
}

// Add adds o to s.
func (s *Stats) Add(o *Stats) {
	s.Accepts += o.Accepts
	s.Closes += o.Closes
	s.Requests += o.Requests
	addEach(s.Status[:], o.Status[:])
	s.BytesIn += o.BytesIn
	s.BytesOut += o.BytesOut
	s.Timeouts += o.Timeouts
	s.Refused += o.Refused
	s.LogDropped += o.LogDropped
	addEach(s.Syscalls[:], o.Syscalls[:])
	s.CacheHits += o.CacheHits
	s.CacheMiss += o.CacheMiss
	s.BufBytes += o.BufBytes
	s.ConnsPeak += o.ConnsPeak
	s.BodyRefs += o.BodyRefs
	s.BodyRefBytes += o.BodyRefBytes
	s.BadTransitions += o.BadTransitions
	addEach(s.Proxy[:], o.Proxy[:])
	s.FS.add(&o.FS)
	addEach(s.Own[:], o.Own[:])
	if s.OwnCounters == nil {
		s.OwnCounters = o.OwnCounters
	}
}

// FSStats count a loop's file-system operations (fsop.go): those
// offloaded that landed, by kind; the loads the loop's probe did itself;
// the gauges as of the last publish (handed to helpers and not landed,
// of those not taken by a helper yet, requests waiting); and how long the
// offloaded ones took, by bucket (Wait[i] counts waits up to
// FSWaitBounds[i], the last bucket the rest), with their sum in seconds.
type FSStats struct {
	Ops      [NumFSKinds]uint64
	Inline   uint64
	InFlight uint64
	Queued   uint64
	Waiting  uint64
	Wait     [len(FSWaitBounds) + 1]uint64
	WaitSum  float64
}

func (s *FSStats) add(o *FSStats) {
	addEach(s.Ops[:], o.Ops[:])
	addEach(s.Wait[:], o.Wait[:])
	s.Inline += o.Inline
	s.InFlight += o.InFlight
	s.Queued += o.Queued
	s.Waiting += o.Waiting
	s.WaitSum += o.WaitSum
}

// addEach adds o[i] to s[i] for each i.
func addEach[T uint64 | int64](s, o []T) {
	for i := range s {
		s[i] += o[i]
	}
}

// TotalSyscalls is the sum over every kind.
func (s *Stats) TotalSyscalls() uint64 {
	var n uint64
	for _, v := range s.Syscalls {
		n += v
	}
	return n
}

// String is the one-line summary printed at shutdown and by --stats.
func (s *Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests=%d 2xx=%d 3xx=%d 4xx=%d 5xx=%d accepts=%d closes=%d bytes_in=%d bytes_out=%d timeouts=%d refused=%d cache_hits=%d cache_misses=%d",
		s.Requests, s.Status[2], s.Status[3], s.Status[4], s.Status[5], s.Accepts, s.Closes,
		s.BytesIn, s.BytesOut, s.Timeouts, s.Refused, s.CacheHits, s.CacheMiss)
	total := s.TotalSyscalls()
	fmt.Fprintf(&b, " syscalls=%d", total)
	if s.Requests > 0 {
		fmt.Fprintf(&b, " syscalls_per_req=%.2f", float64(total)/float64(s.Requests))
	}
	for k, v := range s.Syscalls {
		if v > 0 {
			fmt.Fprintf(&b, " %s=%d", Sys(k), v)
		}
	}
	if s.LogDropped > 0 {
		fmt.Fprintf(&b, " log_dropped=%d", s.LogDropped)
	}
	fmt.Fprintf(&b, " buf_bytes=%d conns_peak=%d body_refs=%d body_ref_bytes=%d", s.BufBytes, s.ConnsPeak, s.BodyRefs, s.BodyRefBytes)
	for k, v := range s.FS.Ops {
		if v > 0 {
			fmt.Fprintf(&b, " fs_%s=%d", FSKind(k), v)
		}
	}
	if s.FS.Inline > 0 {
		fmt.Fprintf(&b, " fs_inline=%d", s.FS.Inline)
	}
	for i, c := range s.OwnCounters {
		if c.Key != "" && s.Own[i] != 0 {
			fmt.Fprintf(&b, " %s=%d", c.Key, s.Own[i])
		}
	}
	for k, v := range s.Proxy {
		if v > 0 {
			fmt.Fprintf(&b, " proxy_%s=%d", ProxyResult(k), v)
		}
	}
	if s.BadTransitions > 0 {
		fmt.Fprintf(&b, " bad_transitions=%d", s.BadTransitions)
	}
	return b.String()
}
