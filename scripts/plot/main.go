// Command plot turns a benchmark run's summary.csv (scripts/bench.sh) into
// its summary.md (median tables) and PNG plots: req/s against connections,
// syscalls and CPU-µs per request, and loops scaling. With -readme it also
// rewrites the "latest run" block of results/README.md.
//
//	plot -dir results/2025-01-31_abc1234_quick [-readme results/README.md]
//	plot -ladder -dir results/2025-01-31_abc1234_ladder
//	plot -cold -dir results/2025-01-31_abc1234_cold
//	plot -fixedrate -dir results/2025-01-31_abc1234_fixed-rate
//
// With -ladder it reads make ladder's summary.csv and attribution.csv
// instead (ladder.go); with -cold make cold's cold.csv (cold.go); with
// -fixedrate make fixed-rate's summary.csv (fixedrate.go).
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

	"gonum.org/v1/plot"
)

func main() {
	dir := flag.String("dir", "", "results folder of one run, holding summary.csv")
	readme := flag.String("readme", "", "README whose latest-run block to rewrite (optional)")
	ladder := flag.Bool("ladder", false, "the folder is a make ladder run")
	cold := flag.Bool("cold", false, "the folder is a make cold run")
	fixedRate := flag.Bool("fixedrate", false, "the folder is a make fixed-rate run")
	flag.Parse()
	if *dir == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: plot -dir RESULTS_RUN_DIR [-readme results/README.md] | plot -ladder -dir LADDER_RUN_DIR | plot -cold -dir COLD_RUN_DIR | plot -fixedrate -dir FIXED_RATE_RUN_DIR")
		os.Exit(2)
	}
	run := run
	if *ladder {
		run = func(dir, _ string) error { return runLadder(dir) }
	}
	if *cold {
		run = func(dir, _ string) error { return runCold(dir) }
	}
	if *fixedRate {
		run = func(dir, _ string) error { return runFixedRate(dir) }
	}
	if err := run(*dir, *readme); err != nil {
		fmt.Fprintf(os.Stderr, "plot: %v\n", err)
		os.Exit(1)
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
		return nil, err
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
