// Command server is twinloop: an HTTP/1.1 static-file server with two
// interchangeable event-loop backends, epoll and io_uring.
//
//	server --backend=epoll|uring|auto|blocking --port 8080 --dir ./www --loops N
//
// See --help for every flag and README.md for what the backends do.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	flags "github.com/jessevdk/go-flags"

	"github.com/twinloop/twinloop/backend"
	"github.com/twinloop/twinloop/backend/listen"
	"github.com/twinloop/twinloop/backend/uring"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/metrics"
)

// wrapFileCalls, when set (by TestMain), is the server's
// core.Config.WrapFileCalls: the tests make a file system that never
// answers with it.
var wrapFileCalls func(core.FileCalls) core.FileCalls

// options are the command-line flags. Defaults follow nginx where it has one.
type options struct {
	// Read before the rest (parseOptions); never written to or read from
	// the file itself (no-ini).
	Config      string `long:"config" value-name:"FILE" no-ini:"true" description:"read flags from FILE, an INI file whose keys are the flags' long names (port = 8080, header = *.js=X-A: b; a repeatable flag once per line); flags on the command line override it, and a repeatable one given there replaces the file's list. See --write-config"`
	WriteConfig bool   `long:"write-config" no-ini:"true" description:"print the configuration these flags (and --config) make, in --config's format, defaults commented out, and exit"`

	Backend string        `long:"backend" ini-name:"backend" default:"auto" choice:"auto" choice:"epoll" choice:"uring" choice:"blocking" description:"event loop: io_uring, epoll, or auto (io_uring when this kernel and sandbox allow it, else epoll); blocking is the syscall study's baseline, one thread serving one connection at a time, never chosen by auto"`
	Port    int           `short:"p" long:"port" ini-name:"port" default:"8080" description:"TCP port, on 0.0.0.0 and [::] unless --listen is given"`
	Listen  []string      `long:"listen" ini-name:"listen" value-name:"HOST:PORT" description:"address to listen on instead, repeatable: 127.0.0.1:8080, [::1]:8080"`
	Dir     string        `short:"d" long:"dir" ini-name:"dir" default:"./www" description:"document root; nothing outside it is ever served"`
	Loops   int           `long:"loops" ini-name:"loops" description:"event loops, one OS thread each (default: the CPUs this process may use, GOMAXPROCS, which follows a cgroup CPU limit); with epoll, GOMAXPROCS is raised to loops+1 unless set, so that the file-system helpers never hold a loop's P"`
	Verbose bool          `short:"v" long:"verbose" ini-name:"verbose" description:"access log on stdout (or --access-log), one line per response in --log-format, written off the event loops"`
	Stats   time.Duration `long:"stats" ini-name:"stats" value-name:"INTERVAL" description:"print the counters (requests, syscalls per request, ...) every INTERVAL on stderr; they are always printed at exit"`

	// The access log (-v) and the error log: core/accesslog.go, core/errlog.go.
	LogFormat string `long:"log-format" ini-name:"log-format" default:"combined" choice:"combined" choice:"json" description:"the access log's format: nginx's combined, or one JSON object per line with time, remote_addr, remote_port (the PROXY header's client with --proxy-protocol), method, path, query, protocol, status, bytes (of the body), duration_ms, referer, user_agent and backend, escaped as encoding/json does"`
	AccessLog string `long:"access-log" ini-name:"access-log" value-name:"FILE" default:"-" description:"write the access log to FILE (appended, created 0644), and so turn it on; - is stdout. SIGUSR1 reopens it, as nginx -s reopen, for logrotate"`
	ErrorLog  string `long:"error-log" ini-name:"error-log" value-name:"FILE" default:"-" description:"write the error log (file-system errors a client was answered 500 or 503 for, error pages that cannot be served) to FILE instead of stderr, -; SIGUSR1 reopens it. The server's own start, stop and warning lines stay on stderr"`

	HeaderTimeout    time.Duration `long:"header-timeout" ini-name:"header-timeout" default:"60s" description:"a request head must arrive within this, else 408 and close (nginx client_header_timeout)"`
	BodyTimeout      time.Duration `long:"body-timeout" ini-name:"body-timeout" default:"60s" description:"a request body that makes no progress for this long gets 408 and a close (nginx client_body_timeout)"`
	KeepAliveTimeout time.Duration `long:"keepalive-timeout" ini-name:"keepalive-timeout" default:"75s" description:"idle keep-alive connections are closed after this (nginx keepalive_timeout)"`
	WriteTimeout     time.Duration `long:"write-timeout" ini-name:"write-timeout" default:"60s" description:"a client that reads nothing for this long is dropped (nginx send_timeout)"`
	ShutdownTimeout  time.Duration `long:"shutdown-timeout" ini-name:"shutdown-timeout" default:"5s" description:"on SIGINT/SIGTERM, responses in flight get this long to finish; file-system calls still stuck then (a hung NFS or FUSE mount) get 3s more, after which the server exits without them and says how many it left"`
	DrainDelay       time.Duration `long:"drain-delay" ini-name:"drain-delay" default:"0s" description:"on SIGINT/SIGTERM, serve on for this long, listeners open, while /readyz on --metrics answers 503, so that a balancer's health checks or Kubernetes' readiness probe take the server out of rotation before it stops accepting; meanwhile every response says Connection: close and a keep-alive connection idle for 1s is closed, so that pooled clients move to new connections rather than lose a request at the shutdown (give 2s or more); then the --shutdown-timeout shutdown. A second signal ends the delay; 0 stops accepting at once"`

	ProxyProtocol bool           `long:"proxy-protocol" ini-name:"proxy-protocol" description:"every connection starts with a PROXY protocol header, v1 or v2 (HAProxy's send-proxy and send-proxy-v2, nginx's proxy_protocol, Envoy), on every listener: its client address is the one the access log, CGI's REMOTE_ADDR and REMOTE_PORT see; a connection from outside --proxy-from, or whose header is malformed, cut short or not whole within --header-timeout, is closed unserved, and counted (--metrics: proxy_headers_total). Off by default: a header is then a bad request"`
	ProxyFrom     []string       `long:"proxy-from" ini-name:"proxy-from" value-name:"CIDR" default:"127.0.0.0/8" default:"::1/128" description:"with --proxy-protocol, the networks of the balancers that may send the header (an address or CIDR, repeatable; given once, it replaces the default): a balancer on the same host by default"`
	proxyFrom     []netip.Prefix // --proxy-from, parsed by check

	Metrics       string `long:"metrics" ini-name:"metrics" value-name:"HOST:PORT" description:"serve Prometheus metrics at http://HOST:PORT/metrics, on a listener and goroutines of their own (off the event loops); e.g. 127.0.0.1:9100"`
	Takeover      bool   `long:"takeover" ini-name:"takeover" description:"share the port of a running twinloop (same user) to replace it without downtime: start the new one with --takeover, then SIGTERM the old one; needs net.ipv4.tcp_migrate_req=1 (see README)"`
	NoDeferAccept bool   `long:"no-defer-accept" ini-name:"no-defer-accept" description:"accept a connection as soon as its handshake is done, as nginx does without listen ... deferred; by default the listeners have TCP_DEFER_ACCEPT, which accepts it with its request, saving epoll an EPOLLIN wakeup and its epoll_ctl per short-lived connection, and each loop has enough of them that a burst of 16384 silent connections gets no SYN cookies (see README)"`

	MaxConns       int           `long:"max-conns" ini-name:"max-conns" default:"65536" description:"open connections per loop; beyond it new connections are closed at once"`
	MaxRequestLine int           `long:"max-request-line" ini-name:"max-request-line" default:"8192" description:"longest request line in bytes (414 beyond it)"`
	MaxHeaderBytes int           `long:"max-header-bytes" ini-name:"max-header-bytes" default:"32768" description:"longest request head in bytes (431 beyond it)"`
	MaxHeaders     int           `long:"max-headers" ini-name:"max-headers" default:"100" description:"most header fields in a request (431 beyond it)"`
	MaxBody        int64         `long:"max-body" ini-name:"max-body" default:"1048576" description:"request bodies (Content-Length or chunked) up to this many bytes are read (discarded on static paths, passed to CGI scripts); larger ones get 413 (a chunked body's framing beyond 16 bytes plus twice the data per chunk counts too); 0: every body gets 413"`
	MemBodyMax     int64         `long:"mem-body-max" ini-name:"mem-body-max" default:"65536" description:"files up to this size are kept in memory and sent with their header in one write; larger ones are sent from the file (sendfile/splice)"`
	CacheEntries   int           `long:"cache-entries" ini-name:"cache-entries" default:"4096" description:"open files kept per loop (each holds one fd; with --precompressed a sidecar counts as one more); 404 and 403 answers are kept apart, a quarter as many, at most 1024, and never push a file out"`
	CacheMB        int64         `long:"cache-mb" ini-name:"cache-mb" default:"64" description:"file bodies kept in memory per loop, in MiB"`
	CacheInactive  time.Duration `long:"cache-inactive" ini-name:"cache-inactive" default:"60s" description:"a cached file no request used for this long is closed, so a deleted file's space is freed (nginx open_file_cache inactive)"`
	FSTimeout      time.Duration `long:"fs-timeout" ini-name:"fs-timeout" default:"30s" description:"a request that waited this long for the file system (a hung NFS server, a dying disk) gets 503 with Retry-After; the operation goes on and its result is cached"`

	AutoIndex      bool `long:"autoindex" ini-name:"autoindex" description:"list directories that have no index.html (escaped, sorted, dotfiles hidden), as nginx's autoindex"`
	FollowSymlinks bool `long:"follow-symlinks" ini-name:"follow-symlinks" description:"follow symlinks that lead outside --dir (by default only symlinks that stay inside are followed)"`

	Precompressed bool              `long:"precompressed" ini-name:"precompressed" description:"serve FILE.br, FILE.zst or FILE.gz in place of FILE when the client's Accept-Encoding takes it (the smallest of equal weight) and it is not older than FILE, with Content-Encoding and Vary (nginx gzip_static; off by default)"`
	MaxRanges     int               `long:"max-ranges" ini-name:"max-ranges" default:"100" description:"most ranges one request may ask for; more are answered with the whole file (nginx max_ranges); 1: no multipart/byteranges; 0: Range ignored"`
	CacheControl  []string          `long:"cache-control" ini-name:"cache-control" value-name:"[.EXT[,.EXT]=]VALUE" description:"Cache-Control for files, e.g. \"public, max-age=3600\"; with .EXT= only for those extensions (\".css,.js=max-age=31536000, immutable\"); repeatable; none by default"`
	cacheControl  cacheControl      // --cache-control, parsed by check
	Header        []string          `long:"header" ini-name:"header" value-name:"PATTERN=Name: value" description:"add the field to the answers (200, 206, 304; not errors, redirects or CGI) for files whose URL path matches PATTERN, a glob: /assets/** (that directory and below), *.js (the last segment, anywhere), /index.html; * and ? stay within a segment, ** as a segment is any number of them; a later rule for the same name wins; repeatable; none by default. Fields the server sends itself (Content-Length, Content-Type, Date, ETag, ...) are refused (see README)"`
	headers       []core.HeaderRule // --header, parsed by check
	ErrorPage     []string          `long:"error-page" ini-name:"error-page" value-name:"CODE=/PATH" description:"answer errors with CODE (403, 404, 405, 408, 413, 414, 416, 431, 500, 502, 503, 504) with the file at /PATH inside --dir: its bytes and Content-Type, the error's status; a page that cannot be read gets the built-in one, logged once; repeatable; none by default"`
	errorPages    map[int]string    // --error-page, parsed by check
	Fallback      string            `long:"fallback" ini-name:"fallback" value-name:"/PATH" description:"answer a GET or HEAD for a path that does not exist with this file and 200, for a single-page app's routes (nginx try_files $uri $uri/ /index.html); existing paths, hidden ones (403), CGI and other methods are unchanged; the file must exist at start; none by default"`

	CGIDir     string        `long:"cgi-dir" ini-name:"cgi-dir" value-name:"DIR" description:"run the executables in DIR as CGI/1.1 scripts at /cgi-bin/NAME (GET, HEAD, POST; off by default)"`
	CGITimeout time.Duration `long:"cgi-timeout" ini-name:"cgi-timeout" default:"30s" description:"a CGI script still running after this is killed; 504 if it had sent nothing, else the connection is closed"`
	CGIMax     int           `long:"cgi-max" ini-name:"cgi-max" default:"64" description:"most CGI scripts running at once in the whole process (all loops); a script counts from its fork until it is reaped, and what it left running (daemonized or not) is killed and reaped before it; beyond it a request for a script gets 503 with Retry-After: 1 at once, without a fork. 64: a fixed pool, as FastCGI servers keep, and on io_uring a sixth of the default pipe budget"`

	NoKeepAlive  bool   `long:"no-keepalive" ini-name:"no-keepalive" description:"ablation: close the connection after every response"`
	NoFileCache  bool   `long:"no-file-cache" ini-name:"no-file-cache" description:"ablation: open and fstat the file on every request, as a server without a cache does"`
	EpollCork    string `long:"epoll-cork" ini-name:"epoll-cork" default:"off" choice:"off" choice:"on" description:"ablation (epoll): on sets TCP_CORK before a header whose file body follows and clears it after the body's last byte, two setsockopt per response; off sends the header with MSG_MORE"`
	EpollTrigger string `long:"epoll-trigger" ini-name:"epoll-trigger" default:"edge" choice:"edge" choice:"level" description:"ablation (epoll): edge registers each connection once; level reads once per event and toggles EPOLLOUT with epoll_ctl, as classic epoll servers do"`
	Sendfile     string `long:"sendfile" ini-name:"sendfile" default:"auto" choice:"auto" choice:"always" choice:"never" description:"ablation: auto sends bodies above --mem-body-max from the file; always sends every body from the file; never keeps every body up to a quarter of --cache-mb in memory (larger ones are still sent from the file)"`

	UringMultishot string `long:"uring-multishot" ini-name:"uring-multishot" default:"on" choice:"on" choice:"off" description:"ablation (io_uring): on keeps one multishot accept per listener and one multishot recv per connection armed; off arms a one-shot accept again after each connection and a one-shot recv after each completion (same buffer ring)"`
	UringBatch     string `long:"uring-batch" ini-name:"uring-batch" default:"on" choice:"on" choice:"off" description:"ablation (io_uring): on submits everything a loop pass queued with the pass's one io_uring_enter; off enters the kernel right after each SQE (or linked chain): at least once per request"`
	UringBody      string `long:"uring-body" ini-name:"uring-body" default:"sendfile" choice:"sendfile" choice:"splice" choice:"read" choice:"view" choice:"view-zc" description:"ablation (io_uring): bodies sent from the file go by sendfile(2) on the loop where in the page cache, cold parts read into a buffer and sent, and by splice for 2 s after any cold part; or file → pipe → socket by splice on io_uring's workers (splice), read and sent (read), or sent from a shared read-only mapping of the file, cold parts read (view; by IORING_OP_SEND_ZC: view-zc)"`
	UringWait      string `long:"uring-wait" ini-name:"uring-wait" default:"batch" choice:"batch" choice:"block" choice:"spin" choice:"raw" description:"io_uring: how a loop with nothing to do sleeps: batch sleeps in a raw io_uring_enter the Go scheduler does not see (lending its P first to goroutines that need one), asking under load for 16 completions and settling for one after 50µs; ablations: block in io_uring_enter through the Go runtime; spin up to 20µs on the rings first; raw as batch without asking for 16 (see backend/uring/wait_linux.go)"`
	UringEnter     string `long:"uring-enter" ini-name:"uring-enter" default:"wait" choice:"wait" choice:"raw" description:"ablation (io_uring): wait submits and sleeps in one io_uring_enter per pass, through the Go runtime; raw first submits through a raw, non-blocking enter and sleeps only when nothing completed"`

	// io_uring's newer features (issue 28), each off: measured, none beat
	// the default by more than the noise, and zero-copy sends and NAPI
	// busy polling cost more here (results/STUDY.md); a kernel
	// without one refuses it with the version it needs, and
	// --backend=auto then falls back to epoll.
	UringRegRing    string `long:"uring-reg-ring" ini-name:"uring-reg-ring" default:"off" choice:"on" choice:"off" description:"io_uring (Linux 5.18): register each ring's fd with its loop's thread and enter the kernel by its index (IORING_REGISTER_RING_FDS, IORING_ENTER_REGISTERED_RING), sparing every io_uring_enter an fd lookup"`
	UringSkipSend   string `long:"uring-skip-send" ini-name:"uring-skip-send" default:"off" choice:"on" choice:"off" description:"io_uring (Linux 5.17): no completion for a response's header when the steps of its file body are linked behind it (IOSQE_CQE_SKIP_SUCCESS); every other send needs its completion (backend/uring/skipsend_linux.go)"`
	UringRecvBundle string `long:"uring-recv-bundle" ini-name:"uring-recv-bundle" default:"off" choice:"on" choice:"off" description:"io_uring (Linux 6.10): one recv completion for as many provided buffers as the data filled (IORING_RECVSEND_BUNDLE)"`
	UringBufInc     string `long:"uring-buf-inc" ini-name:"uring-buf-inc" default:"off" choice:"on" choice:"off" description:"io_uring (Linux 6.12): the kernel consumes the provided recv buffers incrementally (IOU_PBUF_RING_INC), so each loop has 128 buffers of 16 KiB instead of 1024 of 2 KiB, the same 2 MiB (the recv_buf_bytes gauge)"`
	UringSQPoll     string `long:"uring-sqpoll" ini-name:"uring-sqpoll" default:"off" value-name:"off|CPU" description:"io_uring (Linux 5.11): a kernel thread per loop, pinned to CPU, takes the submissions from the ring (IORING_SETUP_SQPOLL|SQ_AFF): no io_uring_enter to submit while it is awake, at the cost of a thread that spins for 1 s after the last one; excludes DEFER_TASKRUN and --uring-wait=spin"`
	UringWaitRegion string `long:"uring-wait-region" ini-name:"uring-wait-region" default:"off" choice:"on" choice:"off" description:"io_uring (Linux 6.13): the kernel reads each wait's timeout from a region registered with the ring (IORING_REGISTER_MEM_REGION, IORING_ENTER_EXT_ARG_REG) instead of copying it in on every wait"`
	UringNAPI       string `long:"uring-napi" ini-name:"uring-napi" default:"off" value-name:"off|USEC" description:"io_uring (Linux 6.9): NAPI busy polling (IORING_REGISTER_NAPI, dynamic tracking): a loop's wait first polls its sockets' NAPI contexts for up to USEC microseconds, running their receive path on the loop's CPU, before it sleeps; loopback has no NAPI, a NIC or a veth with GRO on has (scripts/veth.sh)"`
	UringSendZC     string `long:"uring-send-zc" ini-name:"uring-send-zc" default:"off" value-name:"off|SIZE" description:"io_uring (Linux 6.1): bodies of SIZE bytes or more (a byte count, such as 65536) sent zero-copy: memory bodies by IORING_OP_SENDMSG_ZC with their headers, parts of file bodies in the page cache by IORING_OP_SEND_ZC from the file's mapping; each send's memory stays held until the kernel's notification. On loopback the kernel copies anyway (backend/uring/sendzc_linux.go)"`
	UringFixedFiles string `long:"uring-fixed-files" ini-name:"uring-fixed-files" default:"off" choice:"on" choice:"off" description:"io_uring (Linux 6.8): accept each connection into a table of direct descriptors registered with its loop's ring (IORING_REGISTER_FILES2, IORING_FILE_INDEX_ALLOC) and name it by its index in every recv, send, shutdown and close (IOSQE_FIXED_FILE), sparing each an fd lookup; a connection gets a real fd (IORING_OP_FIXED_FD_INSTALL) only for sendfile(2), getsockopt and its addresses (backend/uring/fixedfd_linux.go)"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, p, err := parseOptions(args)
	if err != nil {
		var ferr *flags.Error
		if errors.As(err, &ferr) && ferr.Type == flags.ErrHelp {
			fmt.Fprintln(stdout, err)
			return 0
		}
		fmt.Fprintf(stderr, "server: %v\n", oneLine(err))
		return 2
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "server: %v%s\n", err, o.fromConfig())
		return 2
	}
	if o.WriteConfig {
		writeConfig(p, stdout)
		return 0
	}
	be, notes, err := backend.Choose(o.Backend, o.backendOptions())
	for _, n := range notes {
		fmt.Fprintf(stderr, "server: %s\n", n)
	}
	if err != nil {
		fmt.Fprintf(stderr, "server: %v\n", err)
		return 1
	}
	cfg := o.config(stdout)
	cfg.WrapFileCalls = wrapFileCalls
	cfg.Backend = be.Name()
	logs, err := o.openLogs(&cfg)
	if err != nil {
		fmt.Fprintf(stderr, "server: %v\n", err)
		return 1
	}
	defer func() {
		for _, lf := range logs {
			lf.Close()
		}
	}()
	// Before the server says it serves: a SIGUSR1 sent at once must not
	// kill it.
	defer reopenOnSignal(logs, stderr)()
	srv, err := core.NewServer(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "server: %v\n", err)
		return 1
	}
	// Last, once the loops have returned: Close waits for the file
	// system only until the exit deadline (--shutdown-timeout plus
	// core.ShutdownGrace), and says what it left behind, so that an
	// exit that did not wait for a hung mount is not a silent one.
	defer func() {
		if err := srv.Close(); err != nil {
			fmt.Fprintf(stderr, "server: %v\n", err)
		}
	}()

	loops := o.loops()
	if be.Name() == "epoll" {
		sparePForHelpers(loops)
	}
	// Checked before listening, so that the operator reads it before
	// stopping the old server.
	migrateOff := listen.MigrateReqOff()
	if o.Takeover && migrateOff != "" {
		fmt.Fprintf(stderr, "server: --takeover: %s\n", migrateOff)
	}
	var metricsLn net.Listener
	if o.Metrics != "" {
		if metricsLn, err = metrics.Listen(o.Metrics, o.Takeover); err != nil {
			fmt.Fprintf(stderr, "server: %v\n", err)
			return 1
		}
		defer metricsLn.Close()
	}
	ls, err := openListeners(o, loops, be.Name() == "blocking", stderr)
	if err != nil {
		fmt.Fprintf(stderr, "server: %v\n", err)
		return 1
	}
	// Our listeners, by inode: on SIGTERM, another listener on our
	// addresses is a --takeover replacement (see the warning below).
	var ownListeners map[uint64]bool
	if migrateOff != "" {
		ownListeners = listen.Inodes(ls.FDs)
	}
	listenAddrs := ls.Addrs
	addrs := make([]string, len(ls.Addrs))
	for i, a := range ls.Addrs {
		addrs[i] = a.String()
	}
	var metricsAt string
	if metricsLn != nil {
		metricsAt = fmt.Sprintf("; metrics at http://%s/metrics", metricsLn.Addr())
	}
	// stopping is done at the first SIGINT or SIGTERM, when /readyz
	// turns 503; ctx, which stops the loops, --drain-delay later. Watched
	// before the server says it serves (and tells systemd READY=1): a
	// signal sent at once must drain, not kill it.
	var health metrics.Health
	served := make(chan struct{})
	stopping, ctx, release := stopOnSignal(o.DrainDelay, &health, served, srv.Retire)
	defer release()

	fmt.Fprintf(stderr, "server: serving %s (%s) on %s with backend %s, %d loop(s)%s\n", cfg.Dir, srv.RootFS(), strings.Join(addrs, " "), be.Name(), loops, metricsAt)
	notify("READY=1")

	if o.Stats > 0 {
		go func() {
			t := time.NewTicker(o.Stats)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					st := srv.Stats()
					fmt.Fprintf(stderr, "server: stats %s\n", st.String())
				}
			}
		}()
	}
	// On SIGTERM, the warning comes at once, not after the drain.
	warned := make(chan struct{})
	go func() {
		defer close(warned)
		select {
		case <-stopping.Done():
			notify("STOPPING=1")
			// Only a server with a replacement beside it loses queued
			// connections to the sysctl; a server alone loses them anyway.
			if migrateOff != "" && listen.Shared(listenAddrs, ownListeners) {
				fmt.Fprintf(stderr, "server: stopping; %s\n", migrateOff)
			}
		case <-served:
		}
	}()
	// The metrics server outlives the drain, so that a scrape during it
	// sees the last requests; it stops once the loops have.
	metricsCtx, stopMetrics := context.WithCancel(context.Background())
	metricsDone := make(chan struct{})
	if metricsLn != nil {
		reg := metrics.Registry(metrics.NewCollector(srv, be))
		go func() {
			defer close(metricsDone)
			if err := metrics.Serve(metricsCtx, metricsLn, reg, &health); err != nil {
				fmt.Fprintf(stderr, "server: metrics at %s stopped: %v (the HTTP server goes on)\n", metricsLn.Addr(), err)
			}
		}()
	} else {
		close(metricsDone)
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	err = be.Serve(ctx, srv, ls)
	close(served)
	<-warned
	stopMetrics()
	<-metricsDone
	if err != nil {
		// A loop that died took the server down with it (fail fast): the
		// exit status tells a supervisor (systemd Restart=on-failure) to
		// start it again.
		fmt.Fprintf(stderr, "server: backend %s: %v; the server stopped (exit status 1: restart it, and report the error if it repeats)\n", be.Name(), err)
		return 1
	}
	st := srv.Stats()
	fmt.Fprintf(stderr, "server: stopped; %s %s\n", st.String(), memSummary(&before, st.Requests))
	return 0
}

// stopOnSignal watches for SIGINT and SIGTERM. At the first, stopping is
// done and health says so (/readyz: 503); ctx is done drain later, or at
// a second signal, and the loops then stop accepting. Until then they
// accept and serve, so that a balancer takes the server out of rotation
// while it still accepts what the balancer sends meanwhile; retire
// (core.Server.Retire), called first, makes every response meanwhile
// close its connection, and idle ones close, so that pooled clients
// move away before the listeners close. Once served
// is closed (the loops returned on their own), it stops watching. Later
// signals are ignored until release, as the shutdown must not be cut
// short by a second Ctrl-C.
func stopOnSignal(drain time.Duration, health *metrics.Health, served <-chan struct{}, retire func()) (stopping, ctx context.Context, release func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	stopping, markStopping := context.WithCancel(context.Background())
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		defer stop()
		select {
		case <-sigs:
		case <-served:
			return
		}
		if drain > 0 {
			retire() // before /readyz says 503: whoever sees that sees this
		}
		health.Stopping()
		markStopping()
		if drain <= 0 {
			return
		}
		t := time.NewTimer(drain)
		defer t.Stop()
		select {
		case <-t.C:
		case <-sigs:
		case <-served:
		}
	}()
	return stopping, ctx, func() { signal.Stop(sigs); markStopping() }
}

// memSummary says how many heap allocations and GC cycles the run cost: the
// loops are meant to allocate nothing per request once warm.
func memSummary(before *runtime.MemStats, requests uint64) string {
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	allocs := after.Mallocs - before.Mallocs
	s := fmt.Sprintf("gc_cycles=%d heap_allocs=%d", after.NumGC-before.NumGC, allocs)
	if requests > 0 {
		s += fmt.Sprintf(" heap_allocs_per_req=%.4f", float64(allocs)/float64(requests))
	}
	return s
}

// check rejects values that would make no sense, with what to do instead.
func (o *options) check() error {
	switch {
	case o.Port < 0 || o.Port > 65535:
		return fmt.Errorf("--port %d is not a TCP port (use 1-65535, or 0 for any free port)", o.Port)
	case o.Loops < 0:
		return fmt.Errorf("--loops %d: give a positive number, or leave it out for one per usable CPU", o.Loops)
	case o.MaxConns <= 0 || o.MaxRequestLine <= 0 || o.MaxHeaderBytes <= 0 || o.MaxHeaders <= 0:
		return errors.New("--max-conns, --max-request-line, --max-header-bytes and --max-headers must be positive")
	case o.MaxRequestLine > o.MaxHeaderBytes:
		return fmt.Errorf("--max-request-line %d is larger than --max-header-bytes %d: raise the latter", o.MaxRequestLine, o.MaxHeaderBytes)
	case o.DrainDelay < 0:
		return fmt.Errorf("--drain-delay %v: give 0 (stop accepting at once) or a positive duration such as 10s", o.DrainDelay)
	case o.HeaderTimeout <= 0 || o.BodyTimeout <= 0 || o.KeepAliveTimeout <= 0 || o.WriteTimeout <= 0 || o.ShutdownTimeout <= 0 || o.CGITimeout <= 0 ||
		o.CacheInactive <= 0 || o.FSTimeout <= 0:
		return errors.New("timeouts must be positive durations such as 500ms, 30s or 2m")
	case o.MemBodyMax < 0 || o.CacheEntries <= 0 || o.CacheMB <= 0 || o.MaxBody < 0:
		return errors.New("--mem-body-max and --max-body must be >= 0, --cache-entries and --cache-mb positive")
	case o.CGIMax <= 0:
		return fmt.Errorf("--cgi-max %d: give the most scripts that may run at once, 1 or more", o.CGIMax)
	case o.MaxRanges < 0:
		return fmt.Errorf("--max-ranges %d: give 0 (Range ignored) or more", o.MaxRanges)
	}
	if _, on := o.sqPollCPU(); !on && o.UringSQPoll != "off" {
		return fmt.Errorf("--uring-sqpoll %q: give off, or the number of the CPU the poll threads run on (0, 1, ...)", o.UringSQPoll)
	}
	if _, on := o.napiUsec(); !on && o.UringNAPI != "off" {
		return fmt.Errorf("--uring-napi %q: give off, or the busy-poll time in microseconds (0, 50, ...)", o.UringNAPI)
	}
	if _, ok := o.sendZC(); !ok {
		return fmt.Errorf("--uring-send-zc %q: give off, or the size in bytes from which bodies go zero-copy, such as 65536", o.UringSendZC)
	}
	var err error
	if o.cacheControl, err = parseCacheControl(o.CacheControl); err != nil {
		return err
	}
	if o.errorPages, err = parseErrorPages(o.ErrorPage); err != nil {
		return err
	}
	o.headers = nil
	for _, a := range o.Header {
		h, err := core.ParseHeaderRule(a)
		if err != nil {
			return err
		}
		o.headers = append(o.headers, h)
	}
	if o.proxyFrom, err = parseProxyFrom(o.ProxyFrom); err != nil {
		return err
	}
	if !o.ProxyProtocol && !slices.Equal(o.proxyFrom, core.DefaultConfig.ProxyFrom) {
		return errors.New("--proxy-from is for --proxy-protocol, which is off: add it, or drop --proxy-from")
	}
	return nil
}

// sqPollCPU is --uring-sqpoll's CPU, and whether it names one.
func (o *options) sqPollCPU() (int, bool) {
	cpu, err := strconv.Atoi(o.UringSQPoll)
	return cpu, err == nil && cpu >= 0
}

// napiUsec is --uring-napi's busy-poll time in µs, and whether it gives one.
func (o *options) napiUsec() (uint32, bool) {
	usec, err := strconv.ParseUint(o.UringNAPI, 10, 32)
	return uint32(usec), err == nil
}

// sendZC is --uring-send-zc's size, 0 for off, and whether the value is
// one of those.
func (o *options) sendZC() (int64, bool) {
	if o.UringSendZC == "off" {
		return 0, true
	}
	n, err := strconv.ParseInt(o.UringSendZC, 10, 64)
	return n, err == nil && n > 0
}

// backendOptions are the backends' own switches.
func (o *options) backendOptions() backend.Options {
	cpu, sqpoll := o.sqPollCPU()
	usec, napi := o.napiUsec()
	zc, _ := o.sendZC()
	return backend.Options{
		EpollLevel:      o.EpollTrigger == "level",
		EpollCork:       o.EpollCork == "on",
		UringOneShot:    o.UringMultishot == "off",
		UringSubmitEach: o.UringBatch == "off",
		UringBody:       uring.BodyModes[o.UringBody],
		UringRawSubmit:  o.UringEnter == "raw",
		UringWait:       map[string]uring.Wait{"block": uring.WaitBlock, "spin": uring.WaitSpin, "raw": uring.WaitRaw, "batch": uring.WaitBatch}[o.UringWait],
		UringFeatures: uring.Features{
			RegRing:          o.UringRegRing == "on",
			SkipSend:         o.UringSkipSend == "on",
			Bundle:           o.UringRecvBundle == "on",
			BufInc:           o.UringBufInc == "on",
			SQPoll:           sqpoll,
			SQPollCPU:        cpu,
			WaitRegion:       o.UringWaitRegion == "on",
			NAPI:             napi,
			NAPIBusyPollUsec: usec,
			SendZC:           zc,
			FixedFiles:       o.UringFixedFiles == "on",
		},
		CGI: o.CGIDir != "",
	}
}

func (o *options) config(stdout io.Writer) core.Config {
	cfg := core.Config{
		Dir:             o.Dir,
		Limits:          core.Limits{MaxRequestLine: o.MaxRequestLine, MaxHeaderBytes: o.MaxHeaderBytes, MaxHeaders: o.MaxHeaders},
		MemBodyMax:      o.MemBodyMax,
		CacheEntries:    o.CacheEntries,
		CacheBytes:      o.CacheMB << 20,
		CacheInactive:   o.CacheInactive,
		FSTimeout:       o.FSTimeout,
		MaxBody:         o.MaxBody,
		BodyTimeout:     o.BodyTimeout,
		HeaderTimeout:   o.HeaderTimeout,
		KeepAlive:       o.KeepAliveTimeout,
		NoKeepAlive:     o.NoKeepAlive,
		WriteTimeout:    o.WriteTimeout,
		ShutdownTimeout: o.ShutdownTimeout,
		MaxConns:        o.MaxConns,
		NoFileCache:     o.NoFileCache,
		AutoIndex:       o.AutoIndex,
		FollowSymlinks:  o.FollowSymlinks,
		CGIDir:          o.CGIDir,
		CGITimeout:      o.CGITimeout,
		CGIMax:          o.CGIMax,
		ServerName:      "twinloop",

		Precompressed:     o.Precompressed,
		MaxRanges:         o.MaxRanges,
		CacheControl:      o.cacheControl.all,
		CacheControlByExt: o.cacheControl.byExt,
		Headers:           o.headers,
		Fallback:          o.Fallback,
		ErrorPages:        o.errorPages,
	}
	if o.ProxyProtocol {
		cfg.ProxyProtocol, cfg.ProxyFrom = true, o.proxyFrom
	}
	if o.MaxRanges == 0 {
		cfg.MaxRanges = -1 // core treats 0 as "default"
	}
	if o.MemBodyMax == 0 {
		cfg.Sendfile = core.SendfileAlways // core treats 0 as "default"
	}
	if o.MaxBody == 0 {
		cfg.MaxBody = -1 // core: 0 is the default, negative is none
	}
	switch o.Sendfile {
	case "always":
		cfg.Sendfile = core.SendfileAlways
	case "never":
		cfg.Sendfile = core.SendfileNever
	}
	if o.Verbose || o.AccessLog != "-" {
		cfg.AccessLog = stdout
	}
	if o.LogFormat == "json" {
		cfg.LogFormat = core.LogJSON
	}
	return cfg
}

// openLogs opens --access-log and --error-log when they name files, and
// makes them cfg's logs: the files SIGUSR1 reopens.
func (o *options) openLogs(cfg *core.Config) ([]*logFile, error) {
	var files []*logFile
	for _, l := range []struct {
		flag, path string
		w          *io.Writer
	}{
		{flag: "--access-log", path: o.AccessLog, w: &cfg.AccessLog},
		{flag: "--error-log", path: o.ErrorLog, w: &cfg.ErrorLog},
	} {
		if l.path == "-" {
			continue
		}
		lf, err := openLogFile(l.path)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("%s: %w (give a file the server may create or append to, or - for the standard stream)", l.flag, err)
		}
		*l.w = lf
		files = append(files, lf)
	}
	return files, nil
}

// openListeners binds --listen, or 0.0.0.0 and [::] on --port. Without
// --listen, a machine with no IPv6 is served on IPv4 alone.
//
// oneEach (the blocking backend) gives each loop one listener per address
// (listen.Options.OneEach).
func openListeners(o *options, loops int, oneEach bool, stderr io.Writer) (*core.Listeners, error) {
	lo := listen.Options{Takeover: o.Takeover, DeferAccept: !o.NoDeferAccept, OneEach: oneEach}
	if len(o.Listen) > 0 {
		return listen.Open(o.Listen, loops, lo)
	}
	port := strconv.Itoa(o.Port)
	ls, err := listen.Open([]string{"0.0.0.0:" + port, "[::]:" + port}, loops, lo)
	if err == nil || !listen.NoIPv6(err) {
		return ls, err
	}
	fmt.Fprintf(stderr, "server: no IPv6 here (%v); serving IPv4 only\n", err)
	return listen.Open([]string{"0.0.0.0:" + port}, loops, lo)
}

// parseErrorPages reads each --error-page as CODE=/PATH; the core checks
// the path.
func parseErrorPages(args []string) (map[int]string, error) {
	var pages map[int]string
	for _, a := range args {
		code, path, ok := strings.Cut(a, "=")
		n, err := strconv.Atoi(code)
		switch {
		case !ok || err != nil || path == "":
			return nil, fmt.Errorf("--error-page %q: write CODE=/PATH, e.g. 404=/404.html", a)
		case !slices.Contains(core.ErrorPageCodes, n):
			return nil, fmt.Errorf("--error-page %q: %d has no error page; give one of %v", a, n, core.ErrorPageCodes)
		case pages[n] != "":
			return nil, fmt.Errorf("--error-page %q: %d has a page already (%s): keep one", a, n, pages[n])
		}
		if pages == nil {
			pages = make(map[int]string)
		}
		pages[n] = path
	}
	return pages, nil
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// sparePForHelpers gives the Go scheduler one P more than there are
// loops, unless GOMAXPROCS was set. An epoll loop sleeps in epoll_wait
// through the runtime, which lets sysmon hand the loop's P to a
// file-system helper goroutine (core/offload.go); when every P is a
// loop's, the loop then waits for the helper to give it back before it
// can serve its next event. On a throttled disk, with the server pinned
// to one CPU, a spare P cut a cached page's p99 beside cold downloads
// (make cold, results/2026-12-01_05170bd_cold and
// results/2026-12-01_a259429_cold). The io_uring loop waits in a raw
// io_uring_enter that keeps its P and lends it when a goroutine is
// runnable (backend/uring/wait_linux.go), so it needs none.
func sparePForHelpers(loops int) {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < loops+1 {
		runtime.GOMAXPROCS(loops + 1)
	}
}

// loops is --loops, by default one loop per CPU this process may use:
// GOMAXPROCS, which follows a cgroup's CPU limit (Go 1.25), where NumCPU
// would count every CPU of the host.
func (o *options) loops() int {
	if o.Loops > 0 {
		return o.Loops
	}
	return runtime.GOMAXPROCS(0)
}
