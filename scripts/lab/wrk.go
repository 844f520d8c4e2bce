// Package lab holds what the benchmark lab shares in Go: the parser of
// wrk's report, the CSV schemas that scripts/wrkparse and scripts/labrun
// write and scripts/plot reads, env.txt's machine record (env.go), and
// for the Go driver scripts/labrun (issue 36) the steps files and their
// per-round order (steps.go) and the statistics of a run's summary.md
// and bench.txt (summary.go, with golang.org/x/perf/benchmath). The shell
// scripts keep apt-get, taskset and process lifetimes; every number they
// take from wrk comes through here.
package lab

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Report is what the lab takes from one wrk run. Latencies are in µs;
// a percentile wrk had no sample for (it prints 0.00us, as in pipelined
// runs, or no distribution without --latency) is NaN.
type Report struct {
	Requests int64   // "N requests in ..."
	RPS      float64 // "Requests/sec:"
	P50, P99 float64 // "Latency Distribution", µs
	P999     float64 // p99.9, µs: loadgen's only (NaN from wrk)
	Max      float64 // the "Latency" line's Max, µs
	Errors   int64   // socket errors: connect + read + write + timeout
	Non2xx   int64   // "Non-2xx or 3xx responses" (status 400 or more)
}

// Fields are the names Field knows, in the order the lab uses them.
var Fields = []string{"requests", "rps", "p50_us", "p99_us", "max_us", "errors", "non2xx", "p999_us"}

// ParseWrk reads a wrk report. It fails when the report has no request
// count or no Requests/sec line (wrk did not run to its end).
func ParseWrk(r io.Reader) (Report, error) {
	rep := Report{P50: math.NaN(), P99: math.NaN(), P999: math.NaN(), Max: math.NaN()}
	var haveReq, haveRPS bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		var err error
		switch {
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			rep.Requests, err = strconv.ParseInt(f[0], 10, 64)
			haveReq = err == nil
		case f[0] == "Requests/sec:" && len(f) == 2:
			rep.RPS, err = strconv.ParseFloat(f[1], 64)
			haveRPS = err == nil
		case f[0] == "Latency" && len(f) >= 4:
			rep.Max, err = duration(f[3])
		case (f[0] == "50%" || f[0] == "99%") && len(f) == 2:
			var v float64
			if v, err = duration(f[1]); err == nil && v == 0 {
				v = math.NaN()
			}
			if f[0] == "50%" {
				rep.P50 = v
			} else {
				rep.P99 = v
			}
		case f[0] == "Socket" && len(f) == 10 && f[1] == "errors:":
			// Socket errors: connect 0, read 65, write 0, timeout 0
			for _, s := range []string{f[3], f[5], f[7], f[9]} {
				var n int64
				if n, err = strconv.ParseInt(strings.TrimSuffix(s, ","), 10, 64); err != nil {
					break
				}
				rep.Errors += n
			}
		case f[0] == "Non-2xx" && len(f) == 5:
			rep.Non2xx, err = strconv.ParseInt(f[4], 10, 64)
		}
		if err != nil {
			return rep, fmt.Errorf("wrk report: line %q: %v", sc.Text(), err)
		}
	}
	if err := sc.Err(); err != nil {
		return rep, err
	}
	if !haveReq || !haveRPS {
		return rep, fmt.Errorf("wrk report: no request count or Requests/sec line (did wrk finish? its output is in the file)")
	}
	return rep, nil
}

// duration converts wrk's "421.00us", "1.45ms", "1.65s", "2.00m", "1.00h"
// to µs.
func duration(s string) (float64, error) {
	units := []struct {
		suffix string
		us     float64
	}{{"us", 1}, {"ms", 1e3}, {"s", 1e6}, {"m", 60e6}, {"h", 3600e6}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("duration %q: %v", s, err)
			}
			return v * u.us, nil
		}
	}
	return 0, fmt.Errorf("duration %q: unknown unit (us, ms, s, m, h)", s)
}

// Field formats one value of the report by name (see Fields): latencies
// as whole µs, empty when wrk had no sample.
func (r Report) Field(name string) (string, error) {
	us := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	switch name {
	case "requests":
		return strconv.FormatInt(r.Requests, 10), nil
	case "rps":
		return strconv.FormatFloat(r.RPS, 'f', 2, 64), nil
	case "p50_us":
		return us(r.P50), nil
	case "p99_us":
		return us(r.P99), nil
	case "max_us":
		return us(r.Max), nil
	case "p999_us":
		return us(r.P999), nil
	case "errors":
		return strconv.FormatInt(r.Errors, 10), nil
	case "non2xx":
		return strconv.FormatInt(r.Non2xx, 10), nil
	}
	return "", fmt.Errorf("unknown wrk field %q (one of %s)", name, strings.Join(Fields, ", "))
}

// ParseLoadgen reads scripts/loadgen's name=value line (its doc lists
// the fields): req/s is the rate achieved, the latencies are from each
// request's intended send time, and unsent (requests of the schedule
// never sent: the server fell behind) comes back beside the report.
func ParseLoadgen(r io.Reader) (rep Report, unsent int64, err error) {
	rep = Report{P50: math.NaN(), P99: math.NaN(), P999: math.NaN(), Max: math.NaN()}
	sc := bufio.NewScanner(r)
	found := false
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "rate_offered=") {
			continue
		}
		found = true
		for _, kv := range strings.Fields(sc.Text()) {
			k, v, _ := strings.Cut(kv, "=")
			x, perr := strconv.ParseFloat(v, 64)
			if perr != nil {
				return rep, 0, fmt.Errorf("loadgen: field %q: %v", kv, perr)
			}
			switch k {
			case "rate_achieved":
				rep.RPS = x
			case "requests":
				rep.Requests = int64(x)
			case "p50_us":
				rep.P50 = x
			case "p99_us":
				rep.P99 = x
			case "p999_us":
				rep.P999 = x
			case "max_us":
				rep.Max = x
			case "errors":
				rep.Errors = int64(x)
			case "non2xx":
				rep.Non2xx = int64(x)
			case "unsent":
				unsent = int64(x)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return rep, 0, err
	}
	if !found {
		return rep, 0, fmt.Errorf("loadgen: no rate_offered= line")
	}
	return rep, unsent, nil
}
