// Package metrics exports the server's counters to Prometheus: --metrics
// ADDR serves /metrics on a listener of its own, on ordinary goroutines,
// never on the event loops; beside it, /livez and /readyz for health
// checks (Health).
//
// The loops already publish a copy of their counters once per tick
// (core.Server.Stats); the Collector reads those copies when Prometheus
// scrapes, so metrics cost the loops no work per request. Every series is
// prefixed twinloop_ and labelled with its loop, since the kernel spreads
// connections over the loops (SO_REUSEPORT) and an unbalanced loop is
// worth seeing; sum by the other labels for the server's totals. The Go
// runtime's and the process's own collectors come with them.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/twinloop/twinloop/backend/listen"
	"github.com/twinloop/twinloop/core"
)

// Collector is a prometheus.Collector over a core.Server's counters.
type Collector struct {
	srv     *core.Server
	backend string
	// own are the series of the backend's own counters (Backend.Counters),
	// by their index into core.Stats.Own.
	own      []*prometheus.Desc
	ownTypes []prometheus.ValueType
	owns     []core.Counter

	mu      sync.Mutex   // guards scratch, as scrapes may overlap
	scratch []core.Stats // the loops' counters, reused between scrapes

	requests, bytesIn, bytesOut, open, accepts, closes, timeouts, refused, logDropped,
	cacheHits, cacheMisses, syscalls, info, bufBytes, connsPeak, bodyRefs, refBytes,
	fsOps, fsInline, fsInFlight, fsQueued, fsWaiting, fsWait, proxy *prometheus.Desc
}

// NewCollector reads srv's counters; be is the --backend in use. A loop's
// series appear once it runs (count(twinloop_connections_open) says how
// many do).
func NewCollector(srv *core.Server, be core.Backend) *Collector {
	loop := []string{"loop"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("twinloop_"+name, help, append(labels, loop...), nil)
	}
	c := &Collector{
		srv:         srv,
		backend:     be.Name(),
		requests:    d("requests_total", "HTTP responses sent, by status class (1xx to 5xx).", "code"),
		bytesIn:     d("received_bytes_total", "Bytes read from clients."),
		bytesOut:    d("sent_bytes_total", "Bytes sent to clients, headers and bodies."),
		open:        d("connections_open", "Client connections open now (as of the loop's last tick)."),
		accepts:     d("accepts_total", "Client connections accepted."),
		closes:      d("closes_total", "Client connections closed."),
		timeouts:    d("timeouts_total", "Connections closed or answered 408 because a timeout passed (header, keep-alive, write, linger, CGI)."),
		refused:     d("refused_total", "Connections closed at accept because the loop had --max-conns open."),
		logDropped:  d("access_log_dropped_lines_total", "Access log lines dropped because the log's writer was stuck (a full disk, a hung file system, a pipe nobody reads) while the loop's 4 MiB buffer filled."),
		cacheHits:   d("cache_hits_total", "Requests answered from the file cache: no system call on the loop (the once-a-second re-stat runs on a helper, or inline on the blocking backend)."),
		cacheMisses: d("cache_misses_total", "Requests that had to load their file (open, stat, read), on the loop when warm or on a helper."),
		syscalls:    d("syscalls_total", "System calls the loop made, by kind (accept4, read, io_uring_enter, ...).", "kind"),
		bufBytes:    d("buffer_bytes", "Capacity of the open connections' input and output buffers."),
		connsPeak:   d("connections_peak", "The most client connections the loop had open at once since it started."),
		bodyRefs:    d("body_refs", "Queued responses whose body is sent from the cached file's memory, not copied."),
		refBytes:    d("body_ref_bytes", "Body bytes those responses reference (a body shared by two counts twice)."),
		info:        prometheus.NewDesc("twinloop_info", "Always 1: the backend serving.", []string{"backend"}, nil),
		fsOps:       d("fs_ops_total", "File-system operations handed off the loop that completed, by kind (load, listing, stat: a revalidation, cgi: a script's lookup).", "kind"),
		fsInline:    d("fs_inline_total", "Cache misses the loop loaded itself, the file being warm (the probe on the loop: RESOLVE_CACHED, RWF_NOWAIT)."),
		fsInFlight:  d("fs_in_flight", "File-system operations handed off the loop and not completed (as of the loop's last tick)."),
		fsQueued:    d("fs_queued", "Of those, the ones no helper has taken yet (as of the loop's last tick)."),
		fsWaiting:   d("fs_waiting_requests", "Requests waiting for a file-system operation (as of the loop's last tick)."),
		fsWait:      d("fs_wait_seconds", "How long file-system operations handed off the loop took, from hand-off to completion on the loop."),
		proxy:       d("proxy_headers_total", "PROXY protocol headers expected (--proxy-protocol), by result: taken, or the connection closed unserved because its peer is outside --proxy-from (untrusted), its header was malformed, cut short by a close (truncated) or not whole within --header-timeout (timeout).", "result"),
	}
	for _, oc := range be.Counters() {
		c.own = append(c.own, d(oc.Metric, oc.Help))
		t := prometheus.CounterValue
		if oc.Gauge {
			t = prometheus.GaugeValue
		}
		c.ownTypes = append(c.ownTypes, t)
		c.owns = append(c.owns, oc)
	}
	return c
}

// Describe sends every series' description (prometheus.Collector).
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.requests, c.bytesIn, c.bytesOut, c.open, c.accepts, c.closes,
		c.timeouts, c.refused, c.logDropped, c.cacheHits, c.cacheMisses, c.syscalls, c.info, c.bufBytes, c.connsPeak, c.bodyRefs, c.refBytes,
		c.fsOps, c.fsInline, c.fsInFlight, c.fsQueued, c.fsWaiting, c.fsWait, c.proxy} {
		ch <- d
	}
	for _, d := range c.own {
		ch <- d
	}
}

// Collect reads the counters the loops published at their last tick
// (prometheus.Collector).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scratch = c.srv.LoopStats(c.scratch)
	ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, c.backend)
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for i := range c.scratch {
		st := &c.scratch[i]
		loop := strconv.Itoa(i)
		for class := 1; class < len(st.Status); class++ {
			counter(c.requests, st.Status[class], strconv.Itoa(class)+"xx", loop)
		}
		counter(c.bytesIn, st.BytesIn, loop)
		counter(c.bytesOut, st.BytesOut, loop)
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(st.Accepts-st.Closes), loop)
		counter(c.accepts, st.Accepts, loop)
		counter(c.closes, st.Closes, loop)
		counter(c.timeouts, st.Timeouts, loop)
		counter(c.refused, st.Refused, loop)
		counter(c.logDropped, st.LogDropped, loop)
		counter(c.cacheHits, st.CacheHits, loop)
		counter(c.cacheMisses, st.CacheMiss, loop)
		for r, v := range st.Proxy {
			counter(c.proxy, v, core.ProxyResult(r).String(), loop)
		}
		for k, v := range st.Syscalls {
			// Each backend makes its own kinds of calls: list those it
			// makes, and the kinds every backend has, even at 0.
			if v > 0 || core.Sys(k) == core.SysAccept || core.Sys(k) == core.SysClose {
				counter(c.syscalls, v, core.Sys(k).String(), loop)
			}
		}
		gauge := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), loop)
		}
		gauge(c.bufBytes, st.BufBytes)
		gauge(c.connsPeak, st.ConnsPeak)
		gauge(c.bodyRefs, st.BodyRefs)
		gauge(c.refBytes, st.BodyRefBytes)
		c.collectFS(ch, &st.FS, loop)
		for j, d := range c.own {
			ch <- prometheus.MustNewConstMetric(d, c.ownTypes[j], float64(c.owns[j].Value(st, j)), loop)
		}
	}
}

// collectFS sends one loop's file-system series.
func (c *Collector) collectFS(ch chan<- prometheus.Metric, fs *core.FSStats, loop string) {
	for k, v := range fs.Ops {
		ch <- prometheus.MustNewConstMetric(c.fsOps, prometheus.CounterValue, float64(v), core.FSKind(k).String(), loop)
	}
	ch <- prometheus.MustNewConstMetric(c.fsInline, prometheus.CounterValue, float64(fs.Inline), loop)
	ch <- prometheus.MustNewConstMetric(c.fsInFlight, prometheus.GaugeValue, float64(fs.InFlight), loop)
	ch <- prometheus.MustNewConstMetric(c.fsQueued, prometheus.GaugeValue, float64(fs.Queued), loop)
	ch <- prometheus.MustNewConstMetric(c.fsWaiting, prometheus.GaugeValue, float64(fs.Waiting), loop)
	buckets := make(map[float64]uint64, len(core.FSWaitBounds))
	var n uint64
	for i, ub := range core.FSWaitBounds {
		n += fs.Wait[i]
		buckets[ub] = n // cumulative, as Prometheus has them
	}
	n += fs.Wait[len(core.FSWaitBounds)]
	ch <- prometheus.MustNewConstHistogram(c.fsWait, n, fs.WaitSum, buckets, loop)
}

// Registry holds c and the Go runtime's and the process's collectors.
func Registry(c *Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Listen opens the metrics listener, so that a bad address is refused at
// start, with what to do. It is bound as the HTTP listeners are (package
// listen): a port in use is refused, unless takeover, when the new server
// shares the old one's metrics port as it shares its HTTP port, and a
// scrape during the overlap reaches either.
func Listen(addr string, takeover bool) (net.Listener, error) {
	ls, err := listen.Open([]string{addr}, 1, listen.Options{Takeover: takeover})
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %v", addr, err)
	}
	f := os.NewFile(uintptr(ls.FDs[0][0]), "metrics")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %v", addr, err)
	}
	return ln, nil
}

// Health is what /livez and /readyz say: the process serves (/livez, 200
// for as long as the metrics listener is up, which is until the loops
// have stopped), and it wants traffic (/readyz, 200 until Stopping, then
// 503). A balancer's health check or Kubernetes' readiness probe on
// /readyz takes the instance out of rotation while --drain-delay keeps
// its listeners open; a liveness probe on /livez does not restart it
// meanwhile.
type Health struct {
	stopping atomic.Bool
}

// Stopping makes /readyz answer 503 from now on: SIGTERM came.
func (h *Health) Stopping() { h.stopping.Store(true) }

// Ready reports whether /readyz answers 200.
func (h *Health) Ready() bool { return !h.stopping.Load() }

func (h *Health) livez(w http.ResponseWriter, r *http.Request) { probeAnswer(w, 200, "ok\n") }

func (h *Health) readyz(w http.ResponseWriter, r *http.Request) {
	if h.Ready() {
		probeAnswer(w, 200, "ready\n")
		return
	}
	probeAnswer(w, 503, "stopping\n")
}

// probeAnswer writes a probe's short answer, which no cache may keep.
func probeAnswer(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// Serve serves reg at /metrics on ln, and h at /livez and /readyz, until
// ctx is done, within lim.
func Serve(ctx context.Context, ln net.Listener, reg *prometheus.Registry, h *Health, lim Limits) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /livez", h.livez) // GET takes HEAD too
	mux.HandleFunc("GET /readyz", h.readyz)
	if lim.MaxConns <= 0 {
		lim.MaxConns = DefaultMaxConns
	}
	// Every connection ends within bounded time, and holds a bounded
	// head: a head within --header-timeout and --max-header-bytes (net/http
	// reads 4 KiB beyond it before it answers 431), an idle keep-alive
	// connection 30 s, so that clients holding connections open cannot
	// spend the fds and memory the HTTP listeners need.
	hs := &http.Server{Handler: mux, MaxHeaderBytes: lim.MaxHeaderBytes,
		ReadHeaderTimeout: lim.HeaderTimeout, ReadTimeout: max(lim.HeaderTimeout, 10*time.Second),
		WriteTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}
	ln = limitListener(ln, lim.MaxConns)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
