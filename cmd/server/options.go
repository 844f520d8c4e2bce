package main

import (
	"net/netip"
	"time"

	"github.com/twinloop/twinloop/core"
)

// options are the command-line flags, in groups as --help shows them:
// the operator's first, the lab's last. Defaults follow nginx where it
// has one. A description is what an operator needs on one glance; the
// long story of each flag is in docs/reference.md ("Flags"), and
// docs/flags.md is --help itself (make docs).
//
// Each group is an embedded struct with a group tag (go-flags): its
// fields are promoted (o.Port), and in --config's file the group's name
// may be the [section] of its keys (--write-config writes them so). The
// group types are exported because go-flags takes their address through
// reflection, which an unexported embedded field does not allow.
type options struct {
	ListenFlags   `group:"Listening"`
	FileFlags     `group:"Files and caching"`
	ResponseFlags `group:"Responses"`
	LimitFlags    `group:"Request limits"`
	TimeoutFlags  `group:"Timeouts and shutdown"`
	LogFlags      `group:"Logging and metrics"`
	ProxyFlags    `group:"Behind a proxy"`
	CGIFlags      `group:"CGI"`
	ConfigFlags   `group:"Configuration file"`

	LabFlags          `group:"Lab: ablations, every backend" description:"The study's switches (docs/lab.md) keep a variant to measure what the default buys; a server in production leaves them alone."`
	EpollLabFlags     `group:"Lab: epoll ablations" description:"Only --backend=epoll uses these (refused with uring, poll or blocking, a warning with auto)."`
	UringLabFlags     `group:"Lab: io_uring ablations" description:"Only --backend=uring uses these (refused with epoll, poll or blocking, a warning with auto)."`
	UringFeatureFlags `group:"Lab: io_uring features" description:"Each off: measured, none beat the default by more than the noise (results/STUDY.md). Only --backend=uring uses them; a kernel without one refuses it with the version it needs, and auto then falls back to epoll."`

	proxyFrom    []netip.Prefix    // --proxy-from, parsed by check
	cacheControl cacheControl      // --cache-control, parsed by check
	headers      []core.HeaderRule // --header, parsed by check
	errorPages   map[int]string    // --error-page, parsed by check
}

type ListenFlags struct {
	Backend       string   `long:"backend" ini-name:"backend" default:"auto" choice:"auto" choice:"epoll" choice:"uring" choice:"poll" choice:"blocking" description:"event loop: uring (io_uring), epoll, or auto: io_uring where this kernel and sandbox allow it, else epoll; the study's baselines, never chosen by auto: poll (level-triggered poll(2), every connection scanned on every wait) and blocking (one connection at a time)"`
	Port          int      `short:"p" long:"port" ini-name:"port" default:"8080" description:"TCP port, on 0.0.0.0 and [::] unless --listen is given"`
	Listen        []string `long:"listen" ini-name:"listen" value-name:"HOST:PORT" description:"address to listen on instead, repeatable: 127.0.0.1:8080, [::1]:8080"`
	Loops         int      `long:"loops" ini-name:"loops" description:"event loops, one OS thread each (default: one per CPU this process may use, GOMAXPROCS, which follows a cgroup CPU limit)"`
	MaxConns      int      `long:"max-conns" ini-name:"max-conns" default:"65536" description:"open connections per loop; beyond it new connections are closed at once"`
	Takeover      bool     `long:"takeover" ini-name:"takeover" description:"share the port of a running twinloop to replace it without downtime: start the new one, then SIGTERM the old; needs net.ipv4.tcp_migrate_req=1"`
	NoDeferAccept bool     `long:"no-defer-accept" ini-name:"no-defer-accept" description:"accept a connection at its handshake, not with its first request (no TCP_DEFER_ACCEPT)"`
}

type FileFlags struct {
	Dir            string        `short:"d" long:"dir" ini-name:"dir" value-name:"DIR" default:"./www" description:"document root; nothing outside it is ever served"`
	FollowSymlinks bool          `long:"follow-symlinks" ini-name:"follow-symlinks" description:"follow symlinks that lead outside --dir (by default only those that stay inside)"`
	AutoIndex      bool          `long:"autoindex" ini-name:"autoindex" description:"list directories that have no index.html, as nginx's autoindex"`
	MemBodyMax     int64         `long:"mem-body-max" ini-name:"mem-body-max" default:"65536" description:"files up to this size are kept in memory and sent with their header in one write; larger ones from the file"`
	CacheEntries   int           `long:"cache-entries" ini-name:"cache-entries" default:"4096" description:"open files kept per loop, one fd each"`
	CacheMB        int64         `long:"cache-mb" ini-name:"cache-mb" default:"64" description:"file bodies kept in memory per loop, in MiB"`
	CacheInactive  time.Duration `long:"cache-inactive" ini-name:"cache-inactive" default:"60s" description:"a cached file no request used for this long is closed (nginx open_file_cache inactive)"`
}

type ResponseFlags struct {
	Precompressed bool     `long:"precompressed" ini-name:"precompressed" description:"serve FILE.br, FILE.zst or FILE.gz for FILE when the client takes it and it is not older (nginx gzip_static)"`
	MaxRanges     int      `long:"max-ranges" ini-name:"max-ranges" default:"100" description:"most ranges one request may ask for; more get the whole file; 1: no multipart; 0: Range ignored"`
	CacheControl  []string `long:"cache-control" ini-name:"cache-control" value-name:"[.EXT[,.EXT]=]VALUE" description:"Cache-Control for files, or with .EXT= for those extensions only; repeatable"`
	Header        []string `long:"header" ini-name:"header" value-name:"PATTERN=Name: value" description:"add a field to 200, 206 and 304 answers for files whose URL path matches PATTERN, a glob (/assets/**, *.js); repeatable"`
	ErrorPage     []string `long:"error-page" ini-name:"error-page" value-name:"CODE=/PATH" description:"answer error CODE (403, 404, 405, 408, 413, 414, 416, 431, 500, 502, 503, 504) with the file /PATH inside --dir; repeatable"`
	Fallback      string   `long:"fallback" ini-name:"fallback" value-name:"/PATH" description:"answer a GET or HEAD for a path that does not exist with this file and 200, for a single-page app's routes; it must exist at start"`
}

type LimitFlags struct {
	MaxRequestLine int   `long:"max-request-line" ini-name:"max-request-line" default:"8192" description:"longest request line in bytes (414 beyond it)"`
	MaxHeaderBytes int   `long:"max-header-bytes" ini-name:"max-header-bytes" default:"32768" description:"longest request head in bytes (431 beyond it)"`
	MaxHeaders     int   `long:"max-headers" ini-name:"max-headers" default:"100" description:"most header fields in a request (431 beyond it)"`
	MaxBody        int64 `long:"max-body" ini-name:"max-body" default:"1048576" description:"longest request body in bytes, read and discarded (or passed to CGI); 413 beyond it; 0: every body gets 413"`
}

type TimeoutFlags struct {
	HeaderTimeout    time.Duration `long:"header-timeout" ini-name:"header-timeout" default:"60s" description:"a request head must arrive within this, else 408 and close (nginx client_header_timeout)"`
	BodyTimeout      time.Duration `long:"body-timeout" ini-name:"body-timeout" default:"60s" description:"a request body that makes no progress for this long gets 408 and a close (nginx client_body_timeout)"`
	KeepAliveTimeout time.Duration `long:"keepalive-timeout" ini-name:"keepalive-timeout" default:"75s" description:"idle keep-alive connections are closed after this (nginx keepalive_timeout)"`
	WriteTimeout     time.Duration `long:"write-timeout" ini-name:"write-timeout" default:"60s" description:"a client that reads nothing for this long is dropped (nginx send_timeout)"`
	FSTimeout        time.Duration `long:"fs-timeout" ini-name:"fs-timeout" default:"30s" description:"a request that waited this long for the file system (a hung NFS or FUSE mount) gets 503 with Retry-After; a body whose next part it does not give in this time is closed"`
	ShutdownTimeout  time.Duration `long:"shutdown-timeout" ini-name:"shutdown-timeout" default:"5s" description:"on SIGINT/SIGTERM, responses in flight get this long to finish"`
	DrainDelay       time.Duration `long:"drain-delay" ini-name:"drain-delay" default:"0s" description:"on SIGINT/SIGTERM, serve on this long while /readyz on --metrics answers 503 and every response says Connection: close, so that a balancer and pooled clients move away first (give 2s or more); a second signal ends it"`
}

// LogFlags are what the server says about its work.
type LogFlags struct {
	Verbose bool          `short:"v" long:"verbose" ini-name:"verbose" description:"access log on stdout (or --access-log), one line per response in --log-format, written off the event loops"`
	Stats   time.Duration `long:"stats" ini-name:"stats" value-name:"INTERVAL" description:"print the counters (requests, syscalls per request, ...) every INTERVAL on stderr; always at exit"`
	// The access log (-v) and the error log: core/accesslog.go, core/errlog.go.
	LogFormat string `long:"log-format" ini-name:"log-format" default:"combined" choice:"combined" choice:"json" description:"the access log's format: nginx's combined, or one JSON object per line (docs/reference.md lists its keys)"`
	AccessLog string `long:"access-log" ini-name:"access-log" value-name:"FILE" default:"-" description:"write the access log to FILE (appended), and so turn it on; - is stdout; SIGUSR1 reopens it, for logrotate"`
	ErrorLog  string `long:"error-log" ini-name:"error-log" value-name:"FILE" default:"-" description:"write the error log (file-system errors answered 500 or 503, error pages that cannot be served) to FILE instead of stderr; SIGUSR1 reopens it"`
	Metrics   string `long:"metrics" ini-name:"metrics" value-name:"HOST:PORT" description:"serve Prometheus metrics at http://HOST:PORT/metrics, and /livez and /readyz, off the event loops; e.g. 127.0.0.1:9100"`
}

type ProxyFlags struct {
	ProxyProtocol bool     `long:"proxy-protocol" ini-name:"proxy-protocol" description:"every connection starts with a PROXY protocol v1 or v2 header (HAProxy send-proxy-v2, nginx proxy_protocol): its client address is the one logged and given to CGI; a connection without a valid one is closed unserved"`
	ProxyFrom     []string `long:"proxy-from" ini-name:"proxy-from" value-name:"CIDR" default:"127.0.0.0/8" default:"::1/128" description:"with --proxy-protocol, the networks of the balancers that may send the header; repeatable, replaces the default"`
}

type CGIFlags struct {
	CGIDir     string        `long:"cgi-dir" ini-name:"cgi-dir" value-name:"DIR" description:"run the executables in DIR as CGI/1.1 scripts at /cgi-bin/NAME (GET, HEAD, POST; off by default)"`
	CGITimeout time.Duration `long:"cgi-timeout" ini-name:"cgi-timeout" default:"30s" description:"a script still running after this is killed; 504 if it had sent nothing, else the connection is closed"`
	CGIMax     int           `long:"cgi-max" ini-name:"cgi-max" default:"64" description:"most scripts running at once in the whole process; beyond it 503 with Retry-After: 1, without a fork"`
}

// ConfigFlags are read before the rest (parseOptions); never written to
// or read from the file itself (no-ini).
type ConfigFlags struct {
	Config      string `long:"config" value-name:"FILE" no-ini:"true" description:"read flags from FILE, an INI file whose keys are the flags' long names (port = 8080); the command line overrides it"`
	WriteConfig bool   `long:"write-config" no-ini:"true" description:"print the configuration these flags (and --config) make, in --config's format, and exit"`
}

type LabFlags struct {
	NoKeepAlive bool   `long:"no-keepalive" ini-name:"no-keepalive" description:"close the connection after every response"`
	NoFileCache bool   `long:"no-file-cache" ini-name:"no-file-cache" description:"open and fstat the file on every request, as a server without a cache does"`
	Sendfile    string `long:"sendfile" ini-name:"sendfile" default:"auto" choice:"auto" choice:"always" choice:"never" description:"auto: bodies above --mem-body-max go from the file; always: every body; never: bodies up to a quarter of --cache-mb from memory"`
}

type EpollLabFlags struct {
	EpollTrigger string `long:"epoll-trigger" ini-name:"epoll-trigger" default:"edge" choice:"edge" choice:"level" description:"edge registers each connection once; level reads once per event and toggles EPOLLOUT with epoll_ctl, as classic epoll servers do"`
	EpollCork    string `long:"epoll-cork" ini-name:"epoll-cork" default:"off" choice:"off" choice:"on" description:"on: TCP_CORK around a header and its file body; off: the header goes with MSG_MORE"`
}

type UringLabFlags struct {
	UringMultishot string `long:"uring-multishot" ini-name:"uring-multishot" default:"on" choice:"on" choice:"off" description:"on: one multishot accept per listener and recv per connection stay armed; off: one-shot, armed again after each completion"`
	UringBatch     string `long:"uring-batch" ini-name:"uring-batch" default:"on" choice:"on" choice:"off" description:"on: one io_uring_enter per loop pass submits all; off: an enter after each SQE, at least one per request"`
	UringBody      string `long:"uring-body" ini-name:"uring-body" default:"sendfile" choice:"sendfile" choice:"splice" choice:"read" choice:"view" choice:"view-zc" description:"how bodies go from the file: sendfile on the loop where cached, cold parts read and sent; or splice, read, view (from a mapping), view-zc (by SEND_ZC)"`
	UringWait      string `long:"uring-wait" ini-name:"uring-wait" default:"batch" choice:"batch" choice:"block" choice:"spin" choice:"raw" description:"how an idle loop sleeps: batch, in a raw io_uring_enter asking under load for 16 completions; block, through the Go runtime; spin 20µs first; raw, batch without the 16"`
	UringEnter     string `long:"uring-enter" ini-name:"uring-enter" default:"wait" choice:"wait" choice:"raw" description:"wait: submit and sleep in one io_uring_enter through the Go runtime; raw: submit by a raw, non-blocking enter first"`
}

// UringFeatureFlags are io_uring's newer features (issue 28), each off:
// measured, none beat the default by more than the noise, and zero-copy
// sends and NAPI busy polling cost more here (results/STUDY.md); a kernel
// without one refuses it with the version it needs, and --backend=auto
// then falls back to epoll.
type UringFeatureFlags struct {
	UringRegRing    string `long:"uring-reg-ring" ini-name:"uring-reg-ring" default:"off" choice:"on" choice:"off" description:"(Linux 5.18) enter each ring by a registered fd (IORING_REGISTER_RING_FDS), sparing an fd lookup"`
	UringSkipSend   string `long:"uring-skip-send" ini-name:"uring-skip-send" default:"off" choice:"on" choice:"off" description:"(Linux 5.17) no completion for a header whose file body is linked behind it (IOSQE_CQE_SKIP_SUCCESS)"`
	UringRecvBundle string `long:"uring-recv-bundle" ini-name:"uring-recv-bundle" default:"off" choice:"on" choice:"off" description:"(Linux 6.10) one recv completion for as many buffers as the data filled (IORING_RECVSEND_BUNDLE)"`
	UringBufInc     string `long:"uring-buf-inc" ini-name:"uring-buf-inc" default:"off" choice:"on" choice:"off" description:"(Linux 6.12) recv buffers consumed incrementally (IOU_PBUF_RING_INC): 128 of 16 KiB per loop instead of 1024 of 2 KiB"`
	UringSQPoll     string `long:"uring-sqpoll" ini-name:"uring-sqpoll" default:"off" value-name:"off|CPU" description:"(Linux 5.11) a kernel thread per loop, pinned to CPU, takes the submissions (IORING_SETUP_SQPOLL); excludes --uring-wait=spin"`
	UringWaitRegion string `long:"uring-wait-region" ini-name:"uring-wait-region" default:"off" choice:"on" choice:"off" description:"(Linux 6.13) each wait's timeout read from a registered region (IORING_REGISTER_MEM_REGION)"`
	UringNAPI       string `long:"uring-napi" ini-name:"uring-napi" default:"off" value-name:"off|USEC" description:"(Linux 6.9) NAPI busy polling for up to USEC microseconds before a loop sleeps (IORING_REGISTER_NAPI)"`
	UringSendZC     string `long:"uring-send-zc" ini-name:"uring-send-zc" default:"off" value-name:"off|SIZE" description:"(Linux 6.1) bodies of SIZE bytes or more (such as 65536) sent zero-copy (IORING_OP_SEND_ZC)"`
	UringFixedFiles string `long:"uring-fixed-files" ini-name:"uring-fixed-files" default:"off" choice:"on" choice:"off" description:"(Linux 6.8) connections as direct descriptors of the ring (IORING_REGISTER_FILES2, IOSQE_FIXED_FILE)"`
}
