package lab

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strings"
)

// The summary.csv schemas: scripts/wrkparse writes them (for bench.sh and
// ladder.sh, the bash lab scripts/labrun replaced, and the scripts left),
// scripts/plot reads them from committed folders. results/README.md says what each
// column means.
var (
	// Summary is the grid's (scripts/bench.sh): one row per measured run.
	// peak_rss_kb is the server's VmHWM at the end of the cell (issue 20);
	// the columns after it are the measure every lab script shares
	// (scripts/lib.sh meter_stop, issue 27).
	Summary = append([]string{"backend", "loops", "conns", "mode", "size", "run", "rps", "p50_us", "p99_us",
		"errors", "non2xx", "cpu_us_per_req", "syscalls_per_req", "syscall_method", "peak_rss_kb"},
		append(Machine, "cs_per_req")...)
	// Ladder is make ladder's (scripts/ladder.sh): one row per step and round.
	Ladder = append([]string{"step", "label", "run", "rps", "p99_us", "errors", "non2xx", "cpu_us_per_req", "cs_per_req",
		"own_syscalls_per_req", "proc_syscalls_per_req", "futex_per_req", "sleep_per_req", "signal_per_req", "netpoll_per_req"},
		append(Machine, "conns", "peak_rss_kb", "cqes_per_req")...)
	// Machine is what scripts/lib.sh meter_stop adds beside the server's
	// cpu_us_per_req (issue 27), in µs per request: every CPU's busy time
	// from /proc/stat (softirq included: on loopback the server's receive
	// path runs there, on the client's CPU), softirq alone, and the load
	// generator's utime + stime. Written at the end of each schema, so that
	// readers of the columns before them are unchanged.
	Machine = []string{"machine_cpu_us_per_req", "softirq_us_per_req", "client_cpu_us_per_req"}
	// FixedRate is scripts/fixed-rate.sh's (before the driver's
	// fixed-rate.steps): one row per server, offered
	// rate and round, from scripts/loadgen (latencies from each request's
	// intended send time; svc_* from its actual send, lag_* the
	// generator's own delay) and scripts/lib.sh meter_stop.
	FixedRate = []string{"server", "rate_offered", "rate_achieved", "p50_us", "p99_us", "p999_us",
		"cpu_us_per_req", "machine_cpu_us_per_req", "softirq_us_per_req", "client_cpu_us_per_req",
		"round", "max_us", "svc_p50_us", "svc_p99_us", "lag_p50_us", "lag_p99_us",
		"requests", "unsent", "unfinished", "errors", "non2xx", "cs_per_req", "saturated"}
	// CGI is scripts/cgi-bench.sh's (before cgi.steps; results/cgi): one row per wrk run; the meter's
	// columns (as the grid's) are empty for the two runs of a mixed cell,
	// which run at once.
	CGI = append(append([]string{"backend", "load", "conns", "rps", "p50_us", "p99_us", "errors", "non2xx",
		"cpu_us_per_req"}, Machine...), "cs_per_req")
	// Rounds is scripts/labrun's rounds.csv (issue 36): one row per step
	// and round, in the order they ran. slot is the step's place in its
	// round (1 = first); seed the run's, which reproduces the order.
	// The CPU figures are µs per request as Machine's; steal_pct is the
	// share of every CPU's time the hypervisor took over the measured
	// window; syscalls_per_req is twinloop's own count over the server's
	// life (warm-up included), empty for the peers; quiet_wait_s is how
	// long the quiet gate waited before the cell. The last three are a
	// fixed-rate cell's (mode rate:N, scripts/loadgen), empty otherwise:
	// p99.9 from the intended send time, the rate offered, and the
	// requests never sent (the server fell behind). The last six are a
	// cold cell's (mode cold:SET): its set, the set's MB/s and files/s and
	// its clients' errors and non-2xx (exact, from scripts/cold.lua's
	// done()), and the server's CPU seconds over the window; rps, the
	// latencies, errors and non2xx are then the cached page's, requests
	// and the CPU per request both loads'. The last seven are a
	// cgi-beside cell's (scripts/uring-wait.sh's columns): rps, latencies
	// and CPU are then the CGI script's alone; beside the static load, its
	// req/s and p99, the static req/s, the /metrics GETs' p50, p99 and max,
	// and how long the server took to exit after SIGTERM. The last five
	// are labrun -smaps's: the server's resident memory (KiB) halfway
	// through the measured run, all and by kind of mapping (io_uring's
	// rings, the executable, anonymous, the rest).
	Rounds = []string{"step", "label", "kind", "conns", "mode", "size", "round", "slot", "seed",
		"requests", "rps", "p50_us", "p99_us", "errors", "non2xx",
		"machine_cpu_us_per_req", "cpu_us_per_req", "softirq_us_per_req", "client_cpu_us_per_req",
		"steal_pct", "cs_per_req", "syscalls_per_req", "peak_rss_kb", "quiet_wait_s", "duration_s",
		"p999_us", "rate_offered", "unsent",
		"set", "cold_MBps", "cold_files_per_s", "cold_errors", "cold_non2xx", "cpu_s",
		"mixed_static_rps", "mixed_cgi_rps", "mixed_cgi_p99_us", "scrape_p50_us", "scrape_p99_us", "scrape_max_us", "sigterm_ms",
		"smaps_rss_kb", "smaps_uring_kb", "smaps_binary_kb", "smaps_anon_kb", "smaps_other_kb",
		"server_accepts_per_kreq", "proxy_connects_per_kreq", "proxy_reuses_per_kreq"}
	// Latency is scripts/labrun's latency.csv, beside rounds.csv in a run
	// with rate:N cells: each measured run's whole latency histogram (from
	// the intended send time, scripts/loadgen's), a row per non-empty
	// bucket: the bucket's upper end in ns (each bucket under 1/128 of its
	// value wide; the last one's end is the largest latency seen) and how
	// many requests fell in it.
	Latency = []string{"step", "round", "upper_ns", "count"}
	// Cold is make cold's cold.csv (scripts/cold.sh's, now scripts/labrun's
	// cold cells, besides rounds.csv): one row per server, cold set and
	// round; hot_* is the cached page, cold_* the set's files.
	Cold = []string{"server", "set", "round", "hot_p99_ms", "hot_rps", "cold_MBps", "cold_files_per_s",
		"cpu_s", "cpu_us_per_req", "hot_p50_ms", "hot_errors", "hot_non2xx", "cold_errors", "cold_non2xx",
		"machine_cpu_us_per_req", "softirq_us_per_req", "client_cpu_us_per_req"}
)

// The TSV tables two A/B scripts print themselves (printf, not
// scripts/wrkparse): scripts/plot reads them with ReadTSV.
var (
	// AB is scripts/ab-c50.sh's: one row per binary (old, new), backend
	// and run. Runs from before issue 27 end at syscalls_per_req.
	AB = append([]string{"binary", "backend", "run", "req_s", "cpu_us_per_req", "syscalls_per_req"}, Machine...)
	// C10k is scripts/c10k-mem.sh's: one row per server (old, new, nginx),
	// backend, mode and run. Runs from before carriers and issue 27 lack
	// the columns after cpu_ms_per_gib.
	C10k = append([]string{"server", "backend", "mode", "run", "req_s", "cpu_us_per_req", "vmhwm_kib", "buf_bytes",
		"body_ref_bytes", "errors", "gib_read", "cpu_ms_per_gib", "carriers"}, Machine...)
)

// Schemas names them for the command line.
var Schemas = map[string][]string{"summary": Summary, "ladder": Ladder, "cgi": CGI, "cold": Cold, "fixedrate": FixedRate, "rounds": Rounds, "latency": Latency}

// Row builds one CSV record of schema: the columns the wrk report has
// (rps, p50_us, ...) from rep when it is not nil, then the name=value
// pairs in set, which win. A name the schema lacks is an error; a column
// nothing fills stays empty.
func Row(schema []string, rep *Report, set []string) ([]string, error) {
	rec := make([]string, len(schema))
	if rep != nil {
		for i, col := range schema {
			if slices.Contains(Fields, col) {
				rec[i], _ = rep.Field(col)
			}
		}
	}
	for _, kv := range set {
		name, val, ok := strings.Cut(kv, "=")
		i := slices.Index(schema, name)
		if !ok || i < 0 {
			return nil, fmt.Errorf("%q: want column=value, with a column of %s", kv, strings.Join(schema, ","))
		}
		rec[i] = val
	}
	return rec, nil
}

// ReadCSV reads a CSV file whose first line must be schema, or the start
// of it: a file written before columns were added at the end reads with
// those columns empty, so that older results folders still plot.
func ReadCSV(r io.Reader, schema []string) ([][]string, error) {
	return readTable(r, schema, ',')
}

// ReadTSV is ReadCSV for a tab-separated table (AB, C10k).
func ReadTSV(r io.Reader, schema []string) ([][]string, error) {
	return readTable(r, schema, '\t')
}

func readTable(r io.Reader, schema []string, comma rune) ([][]string, error) {
	cr := csv.NewReader(r)
	cr.Comma = comma
	cr.FieldsPerRecord = -1 // checked below, against the header
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || len(recs[0]) == 0 || len(recs[0]) > len(schema) || !slices.Equal(recs[0], schema[:len(recs[0])]) {
		return nil, fmt.Errorf("first line must be %s", strings.Join(schema, string(comma)))
	}
	n := len(recs[0])
	out := recs[1:]
	for i, rec := range out {
		if len(rec) != n {
			return nil, fmt.Errorf("line %d: %d fields, the header has %d", i+2, len(rec), n)
		}
		out[i] = append(rec, make([]string, len(schema)-n)...)
	}
	return out, nil
}
