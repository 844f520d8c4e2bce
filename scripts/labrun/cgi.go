package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/twinloop/twinloop/scripts/lab"
)

// scrapes is how many sequential GETs of /metrics a cgi-beside cell makes.
const scrapes = 40

// makeCGI writes the two-line CGI script cgi-beside cells ask for
// (/cgi-bin/hello), as scripts/uring-wait.sh did, and returns its folder.
func makeCGI(work string) (string, error) {
	dir := filepath.Join(work, "cgi")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	script := "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\necho 'Hello World!'\n"
	return dir, os.WriteFile(filepath.Join(dir, "hello"), []byte(script), 0o755)
}

// cgiCell runs a cgi-beside step once (was scripts/uring-wait.sh): what a
// loop's wait costs the server's other goroutines (CGI's fork, stdin and
// reap, the --metrics server, the signal handler). On a fresh server with
// --cgi-dir and --metrics:
//
//	cgi      wrk -c4 on /cgi-bin/hello alone for the duration, metered:
//	         rounds.csv's req/s, latencies and CPU per request
//	mixed    wrk -c<step's connections> keep-alive on the size's page, and
//	         beside it (0.3 s later, 1 s shorter) wrk -c4 on the CGI script
//	         and 40 sequential GETs of /metrics 25 ms apart (each a new
//	         connection, timed from the driver, as curl's time_total was)
//	sigterm  under the same static load, SIGTERM, and the time until the
//	         process has exited
func (r *runner) cgiCell(ctx context.Context, s lab.Step, round, slot int) ([]string, string, error) {
	mport, err := r.nextPort()
	if err != nil {
		return nil, "", err
	}
	maddr := fmt.Sprintf("127.0.0.1:%d", mport)
	s.Flags = append(slices.Clone(s.Flags), "--cgi-dir", r.cgiDir, "--metrics", maddr)
	sv, err := r.startServer(s)
	if err != nil {
		return nil, "", err
	}
	defer sv.stop()
	for i := 0; dialIn("", maddr) != nil; i++ {
		if i == 100 {
			return nil, "", fmt.Errorf("no /metrics listener on %s", maddr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cgi := s
	cgi.Conns, cgi.Mode = 4, "keepalive"
	path, _ := lab.URLPath(s.Size)
	quiesce(sv.pids)
	var waited time.Duration
	if r.quiet {
		waited = quietWait(ctx, r.quietMax)
	}
	m, err := startMeter(sv.pids)
	if err != nil {
		return nil, "", err
	}
	rep, client, _, err := r.wrk(ctx, cgi, sv.port, "/cgi-bin/hello", r.duration)
	if err != nil {
		return nil, "", fmt.Errorf("cgi: %w", err)
	}
	quiesce(sv.pids)
	set, err := m.stop(rep.Requests, client)
	if err != nil {
		return nil, "", err
	}
	time.Sleep(500 * time.Millisecond)

	// mixed
	var wg sync.WaitGroup
	var static, beside lab.Report
	var errStatic, errBeside error
	wg.Add(2)
	go func() { defer wg.Done(); static, _, _, errStatic = r.wrk(ctx, s, sv.port, path, r.duration) }()
	go func() {
		defer wg.Done()
		time.Sleep(300 * time.Millisecond)
		beside, _, _, errBeside = r.wrk(ctx, cgi, sv.port, "/cgi-bin/hello", max(time.Second, r.duration-time.Second))
	}()
	lat, failed := scrape(ctx, "http://"+maddr+"/metrics", scrapes)
	wg.Wait()
	if errStatic != nil || errBeside != nil {
		return nil, "", fmt.Errorf("mixed: %v %v", errStatic, errBeside)
	}
	time.Sleep(500 * time.Millisecond)

	// sigterm under the static load
	wg.Add(1)
	go func() { defer wg.Done(); r.wrk(ctx, s, sv.port, path, 2*time.Second) }()
	time.Sleep(time.Second)
	t0 := time.Now()
	sv.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-sv.done:
	case <-time.After(10 * time.Second):
	}
	term := time.Since(t0)
	wg.Wait()

	slices.Sort(lat)
	pct := func(p float64) string {
		if len(lat) == 0 {
			return ""
		}
		i := int(float64(len(lat))*p/100+0.999) - 1
		return fmt.Sprint(lat[max(0, min(i, len(lat)-1))].Microseconds())
	}
	set = append(set, "step="+s.ID, "label="+s.Label, "kind="+s.Kind, "conns=4", "mode="+s.Mode, "size="+s.Size,
		fmt.Sprintf("round=%d", round), fmt.Sprintf("slot=%d", slot), fmt.Sprintf("seed=%d", r.seed),
		fmt.Sprintf("duration_s=%g", r.duration.Seconds()), "syscalls_per_req="+sv.syscallsPerReq(),
		fmt.Sprintf("errors=%d", rep.Errors+beside.Errors+int64(failed)),
		fmt.Sprintf("mixed_static_rps=%.0f", static.RPS), fmt.Sprintf("mixed_cgi_rps=%.0f", beside.RPS),
		"mixed_cgi_p99_us="+field(beside, "p99_us"), "scrape_p50_us="+pct(50), "scrape_p99_us="+pct(99), "scrape_max_us="+pct(100),
		fmt.Sprintf("sigterm_ms=%d", term.Milliseconds()))
	if r.quiet {
		set = append(set, fmt.Sprintf("quiet_wait_s=%.1f", waited.Seconds()))
	}
	row, err := lab.Row(lab.Rounds, &rep, set)
	if err != nil {
		return nil, "", err
	}
	return row, fmt.Sprintf("CGI alone %.0f req/s, p99 %s µs; beside static %.0f req/s: CGI %.0f req/s, p99 %s µs; /metrics p50 %s p99 %s µs; SIGTERM to exit %d ms",
		rep.RPS, field(rep, "p99_us"), static.RPS, beside.RPS, field(beside, "p99_us"), pct(50), pct(99), term.Milliseconds()), nil
}

func field(rep lab.Report, name string) string { v, _ := rep.Field(name); return v }

// scrape GETs url n times, 25 ms apart, each on a new connection, and
// returns the times of those that answered and how many failed.
func scrape(ctx context.Context, url string, n int) ([]time.Duration, int) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var lat []time.Duration
	failed := 0
	for i := 0; i < n && ctx.Err() == nil; i++ {
		t0 := time.Now()
		resp, err := c.Get(url)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != 200 {
				err = fmt.Errorf("%s", resp.Status)
			}
		}
		if err != nil {
			failed++
		} else {
			lat = append(lat, time.Since(t0))
		}
		time.Sleep(25 * time.Millisecond)
	}
	return lat, failed
}
