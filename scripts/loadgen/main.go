// Command loadgen sends HTTP/1.1 GETs at a fixed rate (open loop, as wrk2
// does) and measures each request's latency from the time the schedule
// meant to send it, so that a server that stalls is charged for the
// requests it kept the client from sending (coordinated omission, which
// a closed-loop client such as wrk hides). The lab's driver runs it for a
// steps file's rate:N cells (scripts/steps/fixed-rate.steps).
//
//	loadgen -addr 127.0.0.1:8080 -path / -rate 10000 -c 50 -d 3s
//
// It keeps -c keep-alive connections, one request in flight on each, and
// sends request i at start + i/rate on whichever connection is free
// first; when none is, the request waits and its wait counts. It prints
// one line for people and one of name=value fields for scripts:
//
//	rate_offered, rate_achieved  req/s asked for, and responses completed
//	                             within the run's -d per second
//	requests                     responses completed (within -d and in the drain)
//	p50_us p99_us p999_us max_us latency from the intended send time to the
//	                             last byte of the response
//	svc_p50_us svc_p99_us        from the actual send: what a closed-loop
//	                             client would report
//	lag_p50_us lag_p99_us        the generator's own delay: from when a
//	                             request could have left (its time, or a
//	                             connection freeing up) to when it did
//	unsent                       requests of the schedule still not sent when
//	                             the drain ended (the server was far behind)
//	unfinished                   requests still in flight after the drain
//	errors non2xx                failed requests (the connection is
//	                             replaced), and responses with status >= 400
//	cpu_us                       the generator's own CPU time over the run
//
// -hist FILE also writes the latency histogram (from the intended send
// time) to FILE: its non-empty buckets, "upper_ns,count", each under
// 1/128 of its value wide.
//
// Linux only (epoll, timerfd); 127.0.0.1 or any IPv4 address:port.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

type config struct {
	addr, path string
	rate       int // requests per second
	conns      int
	duration   time.Duration // of the schedule
	drain      time.Duration // after it, how long requests still due or in flight are waited for
}

func (c config) check() error {
	switch {
	case c.rate <= 0:
		return errors.New("-rate must be positive")
	case c.conns <= 0:
		return errors.New("-c must be positive")
	case c.duration <= 0 || c.duration > 10*time.Minute:
		return errors.New("-d must be between 0 and 10m")
	case c.drain < 0 || c.drain > time.Minute:
		return errors.New("-drain must be between 0 and 1m")
	case !strings.HasPrefix(c.path, "/"):
		return errors.New("-path must start with /")
	}
	return nil
}

// result is what one run measured.
type result struct {
	offered    int64 // requests the schedule holds
	done       int64 // responses completed within the schedule's duration
	unsent     int64
	unfinished int64
	errors     int64
	non2xx     int64
	duration   time.Duration
	cpu        time.Duration // the generator's utime + stime over the run
	latency    hist          // from the intended send time
	service    hist          // from the actual send time
	lag        hist          // the generator's own delay in sending
}

func (r *result) achieved() float64 { return float64(r.done) / r.duration.Seconds() }

// fields is the name=value line.
func (r *result) fields(rate int) string {
	us := func(d time.Duration) int64 { return d.Microseconds() }
	return fmt.Sprintf("rate_offered=%d rate_achieved=%.1f requests=%d p50_us=%d p99_us=%d p999_us=%d max_us=%d "+
		"svc_p50_us=%d svc_p99_us=%d lag_p50_us=%d lag_p99_us=%d unsent=%d unfinished=%d errors=%d non2xx=%d cpu_us=%d",
		rate, r.achieved(), r.latency.n, us(r.latency.quantile(0.5)), us(r.latency.quantile(0.99)),
		us(r.latency.quantile(0.999)), us(r.latency.max), us(r.service.quantile(0.5)), us(r.service.quantile(0.99)),
		us(r.lag.quantile(0.5)), us(r.lag.quantile(0.99)), r.unsent, r.unfinished, r.errors, r.non2xx, us(r.cpu))
}

func main() {
	var c config
	flag.StringVar(&c.addr, "addr", "127.0.0.1:8080", "the server, ip:port")
	flag.StringVar(&c.path, "path", "/", "the path every request asks for")
	flag.IntVar(&c.rate, "rate", 10000, "requests per second")
	flag.IntVar(&c.conns, "c", 50, "keep-alive connections")
	flag.DurationVar(&c.duration, "d", 3*time.Second, "how long the schedule runs")
	flag.DurationVar(&c.drain, "drain", time.Second, "how long to wait after it for requests still due or in flight")
	histFile := flag.String("hist", "", "also write the latency histogram (upper_ns,count per non-empty bucket) to this file")
	flag.Parse()
	r, err := generate(c)
	if err == nil && *histFile != "" {
		err = writeHist(*histFile, &r.latency)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
	fmt.Printf("loadgen: %d req/s offered, %.0f achieved, %d connections, %s; latency from the intended send time: p50 %s, p99 %s, p99.9 %s, max %s; %d errors\n",
		c.rate, r.achieved(), c.conns, c.duration, r.latency.quantile(0.5), r.latency.quantile(0.99),
		r.latency.quantile(0.999), r.latency.max, r.errors)
	fmt.Println(r.fields(c.rate))
}

func writeHist(name string, h *hist) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := h.writeTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
