package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
	"github.com/twinloop/twinloop/metrics"
)

// sample is one line of the text format: the series (name and labels as
// written) and its value.
type sample struct {
	series string
	value  float64
}

func scrape(t *testing.T, url string) (string, []sample) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out []sample
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out = append(out, sample{line[:i], v})
	}
	return string(body), out
}

// sum adds the values of the series whose text starts with name{ and
// contains every label given as `k="v"`.
func sum(samples []sample, name string, labels ...string) (total float64, n int) {
	for _, s := range samples {
		if !strings.HasPrefix(s.series, name+"{") && s.series != name {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(s.series, l)
		}
		if ok {
			total += s.value
			n++
		}
	}
	return total, n
}

// TestMetrics serves requests, then scrapes /metrics as Prometheus would:
// the counters the loops published at their last tick, per loop, prefixed
// twinloop_, with the Go collector's series, in a text promtool accepts.
func TestMetrics(t *testing.T) {
	for _, b := range backend.All() {
		t.Run(b.Name(), func(t *testing.T) {
			dir := servertest.Site(t, map[string]string{"index.html": "hello\n"})
			srv := servertest.Start(t, b, core.Config{Dir: dir}, 2)
			ln, err := metrics.Listen("127.0.0.1:0", false)
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- metrics.Serve(ctx, ln, metrics.Registry(metrics.NewCollector(srv.Core, b)), &metrics.Health{}, metrics.Limits{})
			}()
			t.Cleanup(func() {
				cancel()
				assert.NoError(t, <-done)
			})
			for _, path := range []string{"/", "/", "/", "/missing"} {
				resp, err := http.Get("http://" + srv.Addr + path)
				require.NoError(t, err)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			url := fmt.Sprintf("http://%s/metrics", ln.Addr())
			var text string
			var samples []sample
			// The loops publish once per tick (a second).
			require.Eventually(t, func() bool {
				text, samples = scrape(t, url)
				n, _ := sum(samples, "twinloop_requests_total", `code="4xx"`)
				return n == 1
			}, 5*time.Second, 50*time.Millisecond, "the 404 shows within a tick")
			loops := 2 // servertest.Start's, but the blocking backend's one thread
			if b.Name() == "blocking" {
				loops = 1
			}
			ok, series := sum(samples, "twinloop_requests_total", `code="2xx"`)
			assert.Equal(t, 3.0, ok)
			assert.Equal(t, loops, series, "one series per loop")
			_, classes := sum(samples, "twinloop_requests_total", `loop="0"`)
			assert.Equal(t, 5, classes, "1xx to 5xx")
			accepts, _ := sum(samples, "twinloop_accepts_total")
			assert.GreaterOrEqual(t, accepts, 1.0)
			out, _ := sum(samples, "twinloop_sent_bytes_total")
			assert.Greater(t, out, 3*6.0)
			in, _ := sum(samples, "twinloop_received_bytes_total")
			assert.Greater(t, in, 0.0)
			hits, _ := sum(samples, "twinloop_cache_hits_total")
			misses, _ := sum(samples, "twinloop_cache_misses_total")
			assert.Equal(t, 4.0, hits+misses)
			for _, name := range []string{"twinloop_connections_open", "twinloop_timeouts_total", "twinloop_refused_total", "twinloop_closes_total", "go_goroutines", "process_open_fds"} {
				_, n := sum(samples, name)
				assert.Positive(t, n, name)
			}
			// Memory held now (issue 20): a gauge per loop; http.Get's
			// keep-alive connection holds its buffers.
			for _, name := range []string{"twinloop_buffer_bytes", "twinloop_body_refs", "twinloop_body_ref_bytes"} {
				_, n := sum(samples, name)
				assert.Equal(t, loops, n, name)
			}
			held, _ := sum(samples, "twinloop_buffer_bytes")
			assert.Positive(t, held)
			peak, n := sum(samples, "twinloop_connections_peak")
			assert.Equal(t, loops, n, "twinloop_connections_peak")
			assert.GreaterOrEqual(t, peak, 1.0, "http.Get's connection was open")
			_, n = sum(samples, "twinloop_info", `backend="`+b.Name()+`"`)
			assert.Equal(t, 1, n)
			_, n = sum(samples, "twinloop_connections_open")
			assert.Equal(t, loops, n, "count(twinloop_connections_open) is the number of loops")
			_, n = sum(samples, "twinloop_proxy_headers_total")
			assert.Equal(t, loops*int(core.NumProxyResults), n, "a series per loop and result, 0 without --proxy-protocol")
			_, n = sum(samples, "twinloop_syscalls_total", `kind="accept4"`)
			assert.Equal(t, loops, n)
			_, uringSeries := sum(samples, "twinloop_uring_enters_total")
			if b.Name() == "uring" {
				enters, _ := sum(samples, "twinloop_uring_enters_total")
				sqes, _ := sum(samples, "twinloop_uring_sqes_total")
				cqes, _ := sum(samples, "twinloop_uring_cqes_total")
				_, n = sum(samples, "twinloop_uring_body_fallbacks_total")
				assert.Equal(t, loops, n, "a fallback counter per loop")
				for _, name := range []string{"twinloop_uring_chunks", "twinloop_uring_chunk_bytes", "twinloop_uring_pipes", "twinloop_uring_pipe_bytes", "twinloop_uring_accept_queued"} {
					_, n = sum(samples, name)
					assert.Equal(t, loops, n, name)
				}
				assert.Positive(t, enters)
				assert.Positive(t, sqes)
				assert.Positive(t, cqes)
				syscallEnters, _ := sum(samples, "twinloop_syscalls_total", `kind="io_uring_enter"`)
				assert.Equal(t, syscallEnters, enters)
			} else {
				assert.Zero(t, uringSeries, "no io_uring series on "+b.Name())
			}
			_, readaheadSeries := sum(samples, "twinloop_epoll_readaheads_total")
			_, pollReadaheadSeries := sum(samples, "twinloop_poll_readaheads_total")
			switch b.Name() {
			case "epoll":
				waits, _ := sum(samples, "twinloop_syscalls_total", `kind="epoll_wait"`)
				assert.Positive(t, waits)
				assert.Equal(t, loops, readaheadSeries, "a read-ahead counter per loop")
				_, n = sum(samples, "twinloop_epoll_readaheads_inline_total")
				assert.Equal(t, loops, n)
			case "poll":
				waits, _ := sum(samples, "twinloop_syscalls_total", `kind="ppoll"`)
				assert.Positive(t, waits)
				assert.Equal(t, loops, pollReadaheadSeries, "a read-ahead counter per loop")
				_, n = sum(samples, "twinloop_poll_readaheads_inline_total")
				assert.Equal(t, loops, n)
			}
			if b.Name() != "epoll" {
				assert.Zero(t, readaheadSeries, "no epoll series on "+b.Name())
			}
			if b.Name() != "poll" {
				assert.Zero(t, pollReadaheadSeries, "no poll series on "+b.Name())
			}
			// The file system's series: per loop, the histogram's count
			// agreeing with the operations; epoll loads a warm file on
			// the loop (poll too), io_uring hands every miss off,
			// blocking neither.
			_, n = sum(samples, "twinloop_fs_ops_total", `kind="load"`)
			assert.Equal(t, loops, n)
			_, n = sum(samples, "twinloop_fs_wait_seconds_count")
			assert.Equal(t, loops, n)
			ops, _ := sum(samples, "twinloop_fs_ops_total")
			waited, _ := sum(samples, "twinloop_fs_wait_seconds_count")
			assert.Equal(t, ops, waited)
			inline, _ := sum(samples, "twinloop_fs_inline_total")
			switch b.Name() {
			case "uring":
				assert.Positive(t, ops)
			case "epoll", "poll":
				assert.Positive(t, inline)
			default:
				assert.Zero(t, ops+inline)
			}
			t.Run("own", func(t *testing.T) {
				st := srv.Core.Stats()
				ownSeriesCheck(t, b.Name(), text, samples, loops, st.String())
			})
			t.Run("promtool", func(t *testing.T) { promtoolCheck(t, text) })
		})
	}
}

// ownSeries are the series only one backend exports, with the type and
// help text they have always had: dashboards and alerts name them, so
// they stay as they are wherever the backend keeps the counters.
var ownSeries = map[string][]struct{ name, typ, help string }{
	"uring": {
		{"twinloop_uring_sqes_total", "counter", "io_uring submission queue entries handed to the kernel."},
		{"twinloop_uring_cqes_total", "counter", "io_uring completions reaped."},
		{"twinloop_uring_enters_total", "counter", "io_uring_enter calls."},
		{"twinloop_uring_body_fallbacks_total", "counter", "File bodies sent by read + send because the pipe budget was spent (raise fs.pipe-user-pages-soft)."},
		{"twinloop_uring_body_view_sends_total", "counter", "Parts of file bodies sent from the file's shared read-only mapping (copied once by the kernel, no buffer per connection) because no pipe was to be had."},
		{"twinloop_uring_body_cold_total", "counter", "File bodies sent by read + send because their next part was not in the page cache (a splice would hold an io_uring worker while the disk reads)."},
		{"twinloop_uring_accept_queued", "gauge", "Accepted sockets waiting for a pass of the loop to admit them (io_uring admits 128 a pass; as of the loop's last tick)."},
		{"twinloop_uring_chunks", "gauge", "io_uring body chunks mapped now (read + send bodies)."},
		{"twinloop_uring_chunk_bytes", "gauge", "Bytes of the io_uring body chunks mapped now."},
		{"twinloop_uring_pipes", "gauge", "io_uring body pipes open now (splice bodies)."},
		{"twinloop_uring_pipe_bytes", "gauge", "Capacity of the io_uring body pipes open now."},
	},
	"epoll": {
		{"twinloop_epoll_readaheads_total", "counter", "File ranges not in the page cache that a helper read before their sendfile (epoll backend), so that the loop did not wait for the disk."},
		{"twinloop_epoll_readaheads_inline_total", "counter", "File ranges not in the page cache sent inline, the loop waiting for the disk, because the helpers' queue was full."},
	},
	"poll": {
		{"twinloop_poll_readaheads_total", "counter", "File ranges not in the page cache that a helper read before their sendfile (poll backend), so that the loop did not wait for the disk."},
		{"twinloop_poll_readaheads_inline_total", "counter", "File ranges not in the page cache sent inline, the loop waiting for the disk, because the helpers' queue was full (poll backend)."},
	},
}

// ownSeriesCheck checks a scrape of a server of backend be with loops
// loops: the series of be's own counters are there, one per loop, under
// their names, types and help; the other backends' are not. line is the
// server's summary line, where io_uring's SQEs and CQEs show.
func ownSeriesCheck(t *testing.T, be, text string, samples []sample, loops int, line string) {
	help, typ := make(map[string]string), make(map[string]string)
	for _, l := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(l, "# HELP "); ok {
			name, h, _ := strings.Cut(rest, " ")
			help[name] = h
		} else if rest, ok := strings.CutPrefix(l, "# TYPE "); ok {
			name, ty, _ := strings.Cut(rest, " ")
			typ[name] = ty
		}
	}
	for name, series := range ownSeries {
		for _, s := range series {
			_, n := sum(samples, s.name)
			if name != be {
				assert.Zero(t, n, s.name)
				assert.NotContains(t, help, s.name)
				continue
			}
			assert.Equal(t, loops, n, "a series per loop: %s", s.name)
			assert.Equal(t, s.help, help[s.name], s.name)
			assert.Equal(t, s.typ, typ[s.name], s.name)
		}
	}
	if be == "uring" {
		assert.Regexp(t, ` sqes=[1-9]`, line)
		assert.Regexp(t, ` cqes=[1-9]`, line)
	}
}

// promtoolCheck runs Prometheus's own linter on the scraped text.
func promtoolCheck(t *testing.T, text string) {
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian: apt-get install prometheus)")
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "promtool check metrics:\n%s", out)
}

// TestHealth: /livez answers 200 throughout; /readyz 200 until Stopping,
// 503 after; neither may be cached, and HEAD works as a probe's would.
func TestHealth(t *testing.T) {
	ln, err := metrics.Listen("127.0.0.1:0", false)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var h metrics.Health
	go func() { done <- metrics.Serve(ctx, ln, prometheus.NewRegistry(), &h, metrics.Limits{}) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	probe := func(method, path string) (int, string) {
		req, err := http.NewRequest(method, "http://"+ln.Addr().String()+path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		if resp.StatusCode != 405 {
			assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"), path)
		}
		return resp.StatusCode, string(body)
	}
	for _, tc := range []struct {
		stopping bool
		path     string
		status   int
		body     string
	}{
		{path: "/livez", status: 200, body: "ok\n"},
		{path: "/readyz", status: 200, body: "ready\n"},
		{stopping: true, path: "/readyz", status: 503, body: "stopping\n"},
		{stopping: true, path: "/livez", status: 200, body: "ok\n"},
	} {
		if tc.stopping {
			h.Stopping()
		}
		status, body := probe("GET", tc.path)
		assert.Equal(t, tc.status, status, tc.path)
		assert.Equal(t, tc.body, body, tc.path)
		status, body = probe("HEAD", tc.path)
		assert.Equal(t, tc.status, status, "HEAD "+tc.path)
		assert.Empty(t, body)
	}
	status, _ := probe("POST", "/readyz")
	assert.Equal(t, 405, status)
}
