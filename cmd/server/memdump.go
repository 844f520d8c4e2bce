//go:build memdump

package main

// A measurement aid, built only with -tags memdump (labrun -memdump, c10k-rss.steps):
// on SIGUSR2 the server writes where its memory is to the directory named
// by TWINLOOP_MEMDUMP: metrics.txt (runtime/metrics' memory classes, the
// GC's goal and the goroutines), as the process stood, and heap.pprof
// (the heap profile after a GC, for `go tool pprof -sample_index=
// inuse_space` or alloc_space) when TWINLOOP_MEMPROFILERATE turned the
// profile on. The default build has none of it.

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"syscall"
)

func init() {
	dir := os.Getenv("TWINLOOP_MEMDUMP")
	if dir == "" {
		return
	}
	// Linking runtime/pprof turns the heap profile on, at one sample per
	// 512 KiB, where the default build has it off: its buckets and
	// specials would be memory the default build does not have. It stays
	// off unless TWINLOOP_MEMPROFILERATE says one sample per how many
	// bytes (1: every allocation); heap.pprof is empty then.
	runtime.MemProfileRate = 0
	if r, err := strconv.Atoi(os.Getenv("TWINLOOP_MEMPROFILERATE")); err == nil {
		runtime.MemProfileRate = r
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR2)
	go func() {
		for range ch {
			if err := memdump(dir); err != nil {
				fmt.Fprintln(os.Stderr, "memdump:", err)
			}
		}
	}()
}

func memdump(dir string) error {
	names := []string{
		"/memory/classes/total:bytes",
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/free:bytes",
		"/memory/classes/heap/released:bytes",
		"/memory/classes/heap/stacks:bytes",
		"/memory/classes/os-stacks:bytes",
		"/memory/classes/metadata/other:bytes",
		"/memory/classes/metadata/mspan/inuse:bytes",
		"/memory/classes/metadata/mcache/inuse:bytes",
		"/memory/classes/other:bytes",
		"/memory/classes/profiling/buckets:bytes",
		"/gc/heap/goal:bytes",
		"/gc/heap/live:bytes",
		"/gc/stack/starting-size:bytes",
		"/gc/cycles/total:gc-cycles",
		"/sched/goroutines:goroutines",
	}
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	metrics.Read(samples)
	f, err := os.Create(filepath.Join(dir, "metrics.tmp"))
	if err != nil {
		return err
	}
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			fmt.Fprintf(f, "%s %d\n", s.Name, s.Value.Uint64())
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(dir, "metrics.tmp"), filepath.Join(dir, "metrics.txt")); err != nil {
		return err
	}
	if runtime.MemProfileRate == 0 {
		return nil
	}
	runtime.GC() // the profile's in-use figures are as of the last GC
	h, err := os.Create(filepath.Join(dir, "heap.tmp"))
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(h, 0); err != nil {
		h.Close()
		return err
	}
	if err := h.Close(); err != nil {
		return err
	}
	return os.Rename(filepath.Join(dir, "heap.tmp"), filepath.Join(dir, "heap.pprof"))
}
