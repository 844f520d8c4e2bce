package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// modeOf is the mode that reads dir, or false if none does.
func modeOf(dir string) (mode, bool) {
	if vethRun(dir) {
		return mode{}, false
	}
	for _, m := range modes {
		if m.read(filepath.Join(dir, m.file)) == nil {
			return m, true
		}
	}
	return mode{}, false
}

// vethRun tells a folder of scripts/veth.sh's (it has napi.csv): its
// summary.csv has the ladder's schema, but its summary.md, with the NAPI
// polls, is veth.sh's own, which no mode of plot writes.
func vethRun(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "napi.csv"))
	return err == nil
}

// link is a Markdown link's target: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// studyFolders lists, sorted, the folders beside study (results/STUDY.md)
// that it links to: the first path element of each relative link, when
// that is a directory.
func studyFolders(study string) ([]string, error) {
	text, err := os.ReadFile(study)
	if err != nil {
		return nil, err
	}
	root := filepath.Dir(study)
	var out []string
	for _, m := range link.FindAllStringSubmatch(string(text), -1) {
		target, _, _ := strings.Cut(m[1], "#")
		if target == "" || strings.Contains(target, "://") || filepath.IsAbs(target) {
			continue
		}
		first, _, _ := strings.Cut(filepath.ToSlash(filepath.Clean(target)), "/")
		if first == ".." || first == "." {
			continue
		}
		dir := filepath.Join(root, first)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || slices.Contains(out, dir) {
			continue
		}
		out = append(out, dir)
	}
	slices.Sort(out)
	return out, nil
}

// runStudy regenerates the tables and plots of every folder study links
// to with the mode that reads it, and logs a line per folder: the command
// it ran, or why it skipped the folder.
func runStudy(study string, log io.Writer) error {
	dirs, err := studyFolders(study)
	if err != nil {
		return err
	}
	var files []string
	for _, m := range modes {
		if !slices.Contains(files, m.file) {
			files = append(files, m.file)
		}
	}
	for _, dir := range dirs {
		m, ok := modeOf(dir)
		if !ok && vethRun(dir) {
			fmt.Fprintf(log, "skip %s: scripts/veth.sh's, which writes its summary.md itself\n", dir)
			continue
		}
		if !ok {
			fmt.Fprintf(log, "skip %s: no mode reads it (no %s in a schema scripts/plot knows)\n", dir, strings.Join(files, ", "))
			continue
		}
		cmd := "plot -dir " + dir
		if m.flag != "" {
			cmd = "plot -" + m.flag + " -dir " + dir
		}
		fmt.Fprintln(log, cmd)
		if err := m.run(dir); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	return nil
}
