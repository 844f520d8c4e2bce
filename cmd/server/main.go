// Command server is twinloop: an HTTP/1.1 static-file server with two
// interchangeable event-loop backends, epoll and io_uring (and the
// study's baselines, poll and blocking).
//
//	server --backend=epoll|uring|auto|poll|blocking --port 8080 --dir ./www --loops N
//
// See --help (docs/flags.md) for every flag, docs/reference.md for what
// each does, and README.md for where to start reading.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, p, err := parseOptions(args)
	if err != nil {
		var ferr *flags.Error
		if errors.As(err, &ferr) && ferr.Type == flags.ErrHelp {
			writeHelp(p, stdout)
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

	if o.Backend == "auto" {
		if w := o.backendFlagsIgnored(be.Name()); w != "" {
			fmt.Fprintf(stderr, "server: %s\n", w)
		}
	}
	loops := o.loops()
	if be.Name() == "epoll" || be.Name() == "poll" {
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
			if err := metrics.Serve(metricsCtx, metricsLn, reg, &health,
				metrics.Limits{MaxHeaderBytes: o.MaxHeaderBytes, HeaderTimeout: o.HeaderTimeout}); err != nil {
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
	if err := o.backendFlags(); err != nil {
		return err
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
	if err := o.errorPageDirs(); err != nil {
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
// (a poll loop in ppoll, alike)
// through the runtime, which lets sysmon hand the loop's P to a
// file-system helper goroutine (core/offload.go); when every P is a
// loop's, the loop then waits for the helper to give it back before it
// can serve its next event. On a throttled disk, with the server pinned
// to one CPU, a spare P cut a cached page's p99 beside cold downloads
// (make cold, results/2026-12-01_05170bd_cold and
// results/2026-12-01_a259429_cold). The io_uring loop waits in a raw
// io_uring_enter that keeps its P and lends it when a goroutine is
// runnable (yield, backend/uring/loop_linux.go), so it needs none.
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
