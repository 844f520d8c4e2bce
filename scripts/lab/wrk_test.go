package lab

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The testdata files are real wrk 4 reports, from results/ and one run
// against a missing file.
func TestParseWrk(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		file string
		want Report
	}{
		{"keepalive.txt", Report{Requests: 239206, RPS: 79704.22, P50: 421, P99: 1450, Max: 5720}},
		// pipelined: wrk has no sample for 90% and 99% (0.00us)
		{"pipeline16.txt", Report{Requests: 1046176, RPS: 497848.81, P50: 880, P99: nan, Max: 8850}},
		{"socket-errors-seconds.txt", Report{Requests: 393, RPS: 116, P50: 1.65e6, P99: 2.47e6, Max: 2.47e6, Errors: 65}},
		{"milliseconds.txt", Report{Requests: 29308, RPS: 9394.82, P50: 549800, P99: 1.59e6, Max: 1.66e6}},
		{"non2xx.txt", Report{Requests: 59484, RPS: 54073.71, P50: 61, P99: 383, Max: 2930, Non2xx: 59484}},
		// without --latency (scripts/takeover.sh)
		{"no-latency.txt", Report{Requests: 495919, RPS: 41323.61, P50: nan, P99: nan, Max: 28570, Errors: 36}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := ParseWrk(f)
			if err != nil {
				t.Fatal(err)
			}
			same := func(a, b float64) bool {
				return a == b || math.IsNaN(a) && math.IsNaN(b) || math.Abs(a-b) < 1e-6*math.Abs(b)
			}
			if got.Requests != tc.want.Requests || !same(got.RPS, tc.want.RPS) || !same(got.P50, tc.want.P50) ||
				!same(got.P99, tc.want.P99) || !same(got.Max, tc.want.Max) || got.Errors != tc.want.Errors || got.Non2xx != tc.want.Non2xx {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseWrkIncomplete(t *testing.T) {
	for _, in := range []string{
		"",
		"Running 3s test @ http://127.0.0.1:18080/\n  1 threads and 50 connections\n",
		"unable to connect to 127.0.0.1:18080 Connection refused\n",
		"  10 requests in 1.00s, 1KB read\nRequests/sec: 10.00\n     50%  421.00xs\n",
	} {
		if rep, err := ParseWrk(strings.NewReader(in)); err == nil {
			t.Errorf("%q: parsed as %+v, want an error", in, rep)
		}
	}
}

func TestField(t *testing.T) {
	rep := Report{Requests: 393, RPS: 116, P50: 1.65e6, P99: math.NaN(), P999: 2.2e6, Max: 2.4e6, Errors: 65, Non2xx: 2}
	want := map[string]string{"requests": "393", "rps": "116.00", "p50_us": "1650000", "p99_us": "",
		"max_us": "2400000", "errors": "65", "non2xx": "2", "p999_us": "2200000"}
	for _, name := range Fields {
		if got, err := rep.Field(name); err != nil || got != want[name] {
			t.Errorf("Field(%s) = %q, %v; want %q", name, got, err, want[name])
		}
	}
	if _, err := rep.Field("p90_us"); err == nil {
		t.Error("Field(p90_us): no error")
	}
}

func TestRow(t *testing.T) {
	rep := Report{Requests: 10, RPS: 5.5, P50: 421, P99: math.NaN(), Errors: 1}
	got, err := Row(Summary, &rep, []string{"backend=epoll", "loops=1", "cpu_us_per_req=12.5", "errors=7"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"epoll", "1", "", "", "", "", "5.50", "421", "", "7", "0", "12.5", "", "", "", "", "", "", ""}
	if !slices.Equal(got, want) {
		t.Errorf("Row = %q, want %q", got, want)
	}
	for _, bad := range []string{"nosuch=1", "backend"} {
		if _, err := Row(Summary, nil, []string{bad}); err == nil {
			t.Errorf("Row(%q): no error", bad)
		}
	}
}

func TestReadCSV(t *testing.T) {
	in := strings.Join(CGI, ",") + "\nepoll,static,10,1.00,1,2,0,0" + strings.Repeat(",", len(CGI)-8) + "\n"
	recs, err := ReadCSV(strings.NewReader(in), CGI)
	if err != nil || len(recs) != 1 || recs[0][0] != "epoll" {
		t.Fatalf("ReadCSV = %q, %v", recs, err)
	}
	if _, err := ReadCSV(strings.NewReader("a,b\n"), CGI); err == nil {
		t.Error("wrong header: no error")
	}
	// A file from before the last columns were added reads with them
	// empty; a row with another field count than its header is refused.
	old := strings.Join(CGI[:6], ",") + "\nepoll,static,10,1.00,1,2\n"
	recs, err = ReadCSV(strings.NewReader(old), CGI)
	want := append([]string{"epoll", "static", "10", "1.00", "1", "2"}, make([]string, len(CGI)-6)...)
	if err != nil || len(recs) != 1 || !slices.Equal(recs[0], want) {
		t.Errorf("ReadCSV(older header) = %q, %v", recs, err)
	}
	if _, err := ReadCSV(strings.NewReader(old+"epoll,static\n"), CGI); err == nil {
		t.Error("short row: no error")
	}
	if _, err := ReadCSV(strings.NewReader(strings.Join(append(slices.Clip(CGI), "extra"), ",")+"\n"), CGI); err == nil {
		t.Error("header longer than the schema: no error")
	}
}

// loadgen's name=value line, as scripts/loadgen prints it after its line
// for people.
func TestParseLoadgen(t *testing.T) {
	in := "loadgen: 10000 req/s offered, 9998 achieved, 50 connections, 3s; ...\n" +
		"rate_offered=10000 rate_achieved=9998.7 requests=30010 p50_us=61 p99_us=240 p999_us=1900 max_us=4100 " +
		"svc_p50_us=55 svc_p99_us=200 lag_p50_us=3 lag_p99_us=9 unsent=12 unfinished=0 errors=1 non2xx=2 cpu_us=812345\n"
	rep, unsent, err := ParseLoadgen(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := Report{Requests: 30010, RPS: 9998.7, P50: 61, P99: 240, P999: 1900, Max: 4100, Errors: 1, Non2xx: 2}
	if rep != want || unsent != 12 {
		t.Errorf("ParseLoadgen = %+v, unsent %d; want %+v, unsent 12", rep, unsent, want)
	}
	if _, _, err := ParseLoadgen(strings.NewReader("loadgen: -rate must be positive\n")); err == nil {
		t.Error("no fields line: no error")
	}
}
