// Command plot turns a benchmark run's summary.csv (scripts/bench.sh) into
// its summary.md (median tables) and PNG plots: req/s against connections,
// syscalls and CPU-µs per request, and loops scaling. With -readme it also
// rewrites the "latest run" block of results/README.md.
//
//	plot -dir results/2025-01-31_abc1234_quick [-readme results/README.md]
//	plot -ladder -dir results/2025-01-31_abc1234_ladder
//	plot -cold -dir results/2025-01-31_abc1234_cold
//	plot -fixedrate -dir results/2025-01-31_abc1234_fixed-rate
//	plot -bodysizes -dir results/2026-12-02_cfef9af_body-sizes
//	plot -c10k -dir results/2026-12-02_809f9c0_c10k-small
//	plot -labrun -dir results/2026-12-06_abc1234_headline
//	plot -study results/STUDY.md
//
// With -ladder it reads make ladder's summary.csv and attribution.csv
// instead (ladder.go); with -cold make cold's cold.csv (cold.go); with
// -fixedrate make fixed-rate's summary.csv (fixedrate.go); with
// -bodysizes a sizes.txt of scripts/ab-c50.sh tables, one per body size
// (bodysizes.go); with -c10k scripts/c10k-mem.sh's output saved as
// c10k.tsv (c10k.go); with -labrun a scripts/labrun run's rounds.csv
// and env.txt (summary.md with scripts/lab.Summarize, and intervals.png:
// labrun.go). With -study it runs the mode each folder that
// STUDY.md links to needs (study.go): make study.
//
// It reads env.txt from the same folder, if there, and links syscalls.md
// if that exists.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/twinloop/twinloop/scripts/lab"
	"gonum.org/v1/plot"
)

func main() {
	dir := flag.String("dir", "", "results folder of one run, holding summary.csv")
	readme := flag.String("readme", "", "README whose latest-run block to rewrite (optional)")
	chosen := map[string]*bool{}
	for _, m := range modes {
		if m.flag != "" {
			chosen[m.flag] = flag.Bool(m.flag, false, m.usage)
		}
	}
	study := flag.String("study", "", "regenerate every folder this STUDY.md links to, each with its mode (make study)")
	flag.Parse()
	if (*dir == "") == (*study == "") || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: plot -dir RESULTS_RUN_DIR [-readme results/README.md] | plot -ladder|-cold|-fixedrate|-bodysizes|-c10k|-labrun|-kentry -dir RUN_DIR | plot -study results/STUDY.md")
		os.Exit(2)
	}
	run := func(dir string) error { return run(dir, *readme) }
	for _, m := range modes {
		if m.flag != "" && *chosen[m.flag] {
			run = m.run
		}
	}
	if *study != "" {
		run = func(string) error { return runStudy(*study, os.Stdout) }
	}
	if err := run(*dir); err != nil {
		fmt.Fprintf(os.Stderr, "plot: %v\n", err)
		os.Exit(1)
	}
}

// mode is one way of reading a run folder: the flag that picks it (the
// grid's, the default, has none), the file it reads, and what it writes.
type mode struct {
	flag, usage string
	file        string
	// read parses the file as the mode does, so that a folder is the
	// mode's exactly when read succeeds: lab.ReadCSV and lab.ReadTSV tell
	// the schemas apart by their header.
	read func(path string) error
	run  func(dir string) error
}

// modes in the order -study tries them; the first whose read succeeds
// takes the folder.
var modes = []mode{
	{flag: "", file: "summary.csv", read: reads(readRows),
		run: func(dir string) error { return run(dir, "") }},
	{flag: "ladder", usage: "the folder is a make ladder run", file: "summary.csv", read: reads(readLadder), run: runLadder},
	{flag: "fixedrate", usage: "the folder is a make fixed-rate run", file: "summary.csv", read: reads(readFixedRate), run: runFixedRate},
	// scripts/labrun writes its summary.md itself; this rewrites it from
	// rounds.csv and env.txt with the same code (scripts/lab/summary.go)
	// and draws its plot (labrun.go). Before cold: the driver's cold runs
	// also write a cold.csv, and their summary is the driver's.
	{flag: "labrun", usage: "the folder is a scripts/labrun run (make headline)", file: "rounds.csv",
		read: reads(func(r io.Reader) ([][]string, error) { return lab.ReadCSV(r, lab.Rounds) }), run: runLabrun},
	{flag: "cold", usage: "the folder is a make cold run", file: "cold.csv", read: reads(readCold), run: runCold},
	{flag: "bodysizes", usage: "the folder holds sizes.txt: a scripts/ab-c50.sh table per body size", file: "sizes.txt",
		read: reads(readBodySizes), run: runBodySizes},
	{flag: "c10k", usage: "the folder holds c10k.tsv: scripts/c10k-mem.sh's output", file: "c10k.tsv", read: reads(readC10k), run: runC10k},
	// make kentry's folder: bench.txt in Go's benchmark format, its
	// summary.md written from it (scripts/lab/kentry.go).
	{flag: "kentry", usage: "the folder is a make kentry run", file: "bench.txt", read: lab.IsKentry, run: lab.WriteKentrySummary},
}

func reads[T any](read func(io.Reader) ([]T, error)) func(string) error {
	return func(path string) error {
		_, err := readRowsFile(path, read)
		return err
	}
}

// readRowsFile reads the CSV file at path with read, and fails when it
// has no rows.
func readRowsFile[T any](path string, read func(io.Reader) ([]T, error)) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	rows, err := read(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rows) == 0 {
		return nil, errors.New(path + " has no rows")
	}
	return rows, nil
}

// runMode is a mode that reads one CSV file: it reads dir's csv with
// read, draws panels into png, and writes summary.md with md, given the
// rows, the folder's name and its env.txt (empty if there is none).
func runMode[T any](dir, csv, png string, read func(io.Reader) ([]T, error),
	panels func([]T) [][]*plot.Plot, md func(rows []T, run, env string) []byte) error {
	rows, err := readRowsFile(filepath.Join(dir, csv), read)
	if err != nil {
		return err
	}
	if err := savePNG(filepath.Join(dir, png), panels(rows)); err != nil {
		return err
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env.txt"))
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "summary.md"), md(rows, filepath.Base(abs), string(env)), 0o644)
}

// run writes dir's plots and summary.md and, if readme is set, the
// README's latest block.
func run(dir, readme string) error {
	rows, err := readRowsFile(filepath.Join(dir, "summary.csv"), readRows)
	if err != nil {
		return err
	}
	g := newGrid(rows)
	plots, err := writePlots(g, dir)
	if err != nil {
		return err
	}
	env, err := os.ReadFile(filepath.Join(dir, "env.txt"))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	_, statErr := os.Stat(filepath.Join(dir, "syscalls.md"))
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	name := filepath.Base(abs)
	md := summaryMD(g, name, string(env), plots, statErr == nil)
	if err := os.WriteFile(filepath.Join(dir, "summary.md"), md, 0o644); err != nil {
		return err
	}
	if readme == "" {
		return nil
	}
	absReadme, err := filepath.Abs(readme)
	if err != nil {
		return err
	}
	rel, err := relDir(absReadme, abs)
	if err != nil {
		return err
	}
	return updateReadme(readme, latestBlock(g, name, rel, string(env), plots))
}
