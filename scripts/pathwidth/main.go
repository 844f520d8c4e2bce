// Command pathwidth measures which backend functions a request really runs
// (issue 37, item 3), and checks that each backend's doc.go says so: make
// path fails when a doc.go names a function the request did not run, or
// leaves out one it did.
//
//	go build -cover -covermode=atomic -coverpkg=./... -o bin/server.cover ./cmd/server
//	go run ./scripts/pathwidth -server bin/server.cover [-backends epoll,poll] [-check=false] [-v]
//
// For each backend and each kind of request it runs the coverage-built
// server twice, with the default flags and one loop, on 127.0.0.1 (in a
// network namespace of its own where it may: isolate): once serving 2n
// requests of the kind, once n, each on one keep-alive connection, one
// request after the other. A function is on the kind's path when one of
// its blocks ran at least 3n/4 more times in the run of 2n (`go tool
// covdata textfmt` gives each block's count; go/ast places it in its
// function, a closure in the one around it): what the two runs share
// (start, the first request's miss, accept, shutdown) cancels out. So that
// each request takes the same path whatever the machine's load, the client
// waits -gap before each request, which lets the loop go back to sleep,
// and both runs span the same whole seconds of the clock, which gives the
// loop's once-a-second work the same number of runs (serve). The kinds:
//
//	small  a cached 1.5 KB file (n = -n)
//	large  a cached 1 MiB file, in the page cache (n = -n)
//	miss   a warm miss: n distinct files the server has not served, in
//	       the page cache (n = -misses)
//
// Only code under backend/ is counted (backend/internal/loops and
// backend/listen too); the core is the same for every backend. It prints a
// table, backend by kind, of the files and functions each path runs, then
// each backend's lists in the form its doc.go carries them (docs.go says
// the form), and with -check (the default) compares them with the
// doc.go's, kind by kind. About 20 s a backend: each run lasts two seconds
// or more.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	var (
		server   = flag.String("server", "bin/server.cover", "the server, built with -cover -covermode=atomic -coverpkg=./...")
		backends = flag.String("backends", "epoll,uring,poll,blocking", "the backends to measure, comma- or space-separated")
		n        = flag.Int("n", 100, "requests in the first run of small and large (the second: twice as many)")
		misses   = flag.Int("misses", 10, "distinct files in the first run of miss (the second: twice as many)")
		port     = flag.Int("port", 21640, "the servers' port on 127.0.0.1, below 32768 (in the shared network namespace: the first one tried)")
		gap      = flag.Duration("gap", time.Millisecond, "the client's pause before each request, for the loop to go back to sleep")
		root     = flag.String("root", ".", "the repository, whose backend/ sources the server was built from")
		check    = flag.Bool("check", true, "compare each backend's doc.go lists with what ran")
		verbose  = flag.Bool("v", false, "also list the functions that ran more often, but fewer than 3n/4 more times")
	)
	flag.Parse()
	if err := run(os.Stdout, *server, strings.FieldsFunc(*backends, func(r rune) bool { return r == ',' || r == ' ' }),
		*n, *misses, *port, *gap, *root, *check, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "pathwidth:", err)
		os.Exit(1)
	}
}

// paths holds, for one backend, each kind's path by kind key.
type paths map[string]path

func run(w io.Writer, server string, backends []string, n, misses, port int, gap time.Duration, root string, check, verbose bool) error {
	dir, err := os.MkdirTemp("", "pathwidth-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	www := filepath.Join(dir, "www")
	if err := os.Mkdir(www, 0o755); err != nil {
		return err
	}
	if err := makeFiles(www, 2*misses); err != nil {
		return err
	}
	isolated := true
	if err := canIsolate(); err != nil {
		isolated = false
		fmt.Fprintf(os.Stderr, "pathwidth: the servers share this machine's network namespace (%v): a count may include other sockets\n", err)
	}
	fs := newFuncs(root)
	measured := map[string]paths{}
	for _, be := range backends {
		measured[be] = paths{}
		for _, k := range kinds {
			kn := n
			if k.key == "miss" {
				kn = misses
			}
			runs, err := measurePair(dir, server, be, k, www, port, isolated, kn, gap)
			if err != nil {
				return err
			}
			p, err := measure(fs, runs[0], runs[1], kn)
			if err != nil {
				return err
			}
			measured[be][k.key] = p
		}
	}
	printTable(w, backends, measured)
	for _, be := range backends {
		fmt.Fprintf(w, "\n%s:\n", be)
		writeLists(w, be, measured[be])
		if verbose {
			writeRare(w, measured[be])
		}
	}
	if !check {
		return nil
	}
	bad := 0
	for _, be := range backends {
		doc := filepath.Join(root, "backend", be, "doc.go")
		var diffs []string
		if lists, err := readDocLists(doc); err != nil {
			diffs = []string{err.Error()}
		} else {
			diffs = compare(lists, measured[be])
		}
		for _, d := range diffs {
			fmt.Fprintf(w, "%s: %s\n", doc, d)
		}
		if len(diffs) > 0 {
			bad++
		}
	}
	if bad > 0 {
		err := fmt.Errorf("%d backend(s) whose doc.go and measured path differ (above); their measured lists are printed above in doc.go's form", bad)
		if !isolated {
			err = fmt.Errorf("%w (the servers shared this machine's network namespace, whose other sockets show in the counts at shutdown: run as root to give each its own)", err)
		}
		return err
	}
	fmt.Fprintf(w, "\nevery doc.go list is what ran (%s)\n", strings.Join(backends, ", "))
	return nil
}

// measurePair runs the kind's 2n requests, then its n, each run spanning
// the same number of whole seconds (serve), its files warmed first, and
// returns their counts. A pair is run again when its runs spanned
// different numbers of seconds, or when the kernel's caches were dropped
// meanwhile (another program measuring cold files).
func measurePair(dir, server, be string, k kind, www string, port int, isolated bool, n int, gap time.Duration) ([2]map[block]int64, error) {
	var runs [2]map[block]int64
	secs := 1
	for try := 1; ; try++ {
		drops := cacheDrops()
		spans := map[int]bool{}
		for i, cnt := range []int{2 * n, n} {
			cov := filepath.Join(dir, fmt.Sprintf("%s-%s-%d-%d", be, k.key, cnt, try))
			if err := os.Mkdir(cov, 0o755); err != nil {
				return runs, err
			}
			if err := warm(www); err != nil {
				return runs, err
			}
			s, err := serve(server, be, www, port, isolated, k.paths(cnt), gap, secs, cov)
			if err != nil {
				return runs, fmt.Errorf("%s, %s, %d requests: %w", be, k.key, cnt, err)
			}
			spans[s] = true
			secs = max(secs, s)
			if runs[1-i], err = counts(cov); err != nil {
				return runs, err
			}
		}
		why := ""
		switch {
		case cacheDrops() != drops:
			why = "the kernel's caches were dropped during the runs (/proc/vmstat: " + cacheDrops() + ")"
		case len(spans) > 1:
			why = "the runs spanned different numbers of seconds"
		default:
			return runs, nil
		}
		if try == 5 {
			return runs, fmt.Errorf("%s, %s: %s, five times", be, k.key, why)
		}
		fmt.Fprintf(os.Stderr, "pathwidth: %s, %s again: %s\n", be, k.key, why)
	}
}

// printTable prints files / functions per backend and kind, and for all
// three kinds together.
func printTable(w io.Writer, backends []string, measured map[string]paths) {
	fmt.Fprintf(w, "files / functions under backend/ that each kind of request runs (one loop, default flags)\n\n")
	fmt.Fprintf(w, "%-10s", "backend")
	for _, k := range kinds {
		fmt.Fprintf(w, " %8s", k.key)
	}
	fmt.Fprintf(w, " %8s\n", "any")
	for _, be := range backends {
		fmt.Fprintf(w, "%-10s", be)
		var all []fn
		for _, k := range kinds {
			fns := measured[be][k.key].fns
			fmt.Fprintf(w, " %8s", width(fns))
			all = append(all, fns...)
		}
		fmt.Fprintf(w, " %8s\n", width(union(all)))
	}
}

func width(fns []fn) string {
	files := map[string]bool{}
	for _, f := range fns {
		files[f.file] = true
	}
	return fmt.Sprintf("%d / %d", len(files), len(fns))
}

// union drops the repeats of fns, sorted.
func union(fns []fn) []fn {
	seen := map[string]bool{}
	var u []fn
	for _, f := range fns {
		if k := f.file + ": " + f.name; !seen[k] {
			seen[k] = true
			u = append(u, f)
		}
	}
	sortFns(u)
	return u
}

// writeRare lists, per kind, the functions that ran more often in the
// run of 2n, but fewer than 3n/4 more times.
func writeRare(w io.Writer, ps paths) {
	for _, k := range kinds {
		rare := ps[k.key].rare
		var fns []fn
		for f := range rare {
			fns = append(fns, f)
		}
		sortFns(fns)
		if len(fns) == 0 {
			continue
		}
		fmt.Fprintf(w, "  %s, ran more often, but fewer than 3n/4 more times:\n", k.key)
		for _, f := range fns {
			fmt.Fprintf(w, "    %s: %s +%d\n", f.file, f.name, rare[f])
		}
	}
}
