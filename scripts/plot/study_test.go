package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// -study takes the folders STUDY.md links to (once each, sorted; not web
// links, files or folders outside it), runs the mode that reads each, and
// logs the folders no mode reads.
func TestRunStudy(t *testing.T) {
	root := t.TempDir()
	for dir, files := range map[string][]string{"grid-run": {"summary.csv", "env.txt"}, "ladder": {"summary.csv", "attribution.csv", "env.txt"}} {
		require.NoError(t, os.Mkdir(filepath.Join(root, dir), 0o755))
		src := "testdata"
		if dir == "ladder" {
			src = filepath.Join("testdata", "ladder")
		}
		copyFiles(t, src, filepath.Join(root, dir), files...)
	}
	require.NoError(t, os.Mkdir(filepath.Join(root, "hand"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "hand", "README.md"), []byte("# by hand\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "README.md"), []byte("# results\n"), 0o644))
	study := filepath.Join(root, "STUDY.md")
	require.NoError(t, os.WriteFile(study, []byte(strings.Join([]string{
		"The [ladder](ladder/summary.md#the-a-a-pairs) and [its plot](ladder/ladder.png),",
		"[a grid](grid-run/summary.md), [by hand](hand/README.md), [gone](missing/README.md),",
		"[the index](README.md), [the tool](../scripts/plot/main.go), [a peer](https://nginx.org/en/).",
	}, "\n")), 0o644))

	dirs, err := studyFolders(study)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(root, "grid-run"), filepath.Join(root, "hand"), filepath.Join(root, "ladder")}, dirs)

	var log bytes.Buffer
	require.NoError(t, runStudy(study, &log))
	assert.Equal(t, "plot -dir "+filepath.Join(root, "grid-run")+"\n"+
		"skip "+filepath.Join(root, "hand")+": no mode reads it (no summary.csv, rounds.csv, cold.csv, sizes.txt, c10k.tsv, bench.txt in a schema scripts/plot knows)\n"+
		"plot -ladder -dir "+filepath.Join(root, "ladder")+"\n", log.String())
	for _, f := range []string{"grid-run/summary.md", "grid-run/rps_vs_conns.png", "ladder/summary.md", "ladder/attribution.png"} {
		assert.FileExists(t, filepath.Join(root, f))
	}
	assert.NoFileExists(t, filepath.Join(root, "hand", "summary.md"))
}

// pinnedRuns are a committed folder of each mode, checked below even if
// STUDY.md stops linking to them.
var pinnedRuns = map[string]string{
	"":          "2026-11-30_e64edd7_part",
	"ladder":    "2026-12-02_8db19b5_ladder",
	"fixedrate": "2026-12-02_0236daa_fixed-rate",
	"cold":      "2026-12-01_956fe94_cold",
	"bodysizes": "2026-12-02_cfef9af_body-sizes",
	"c10k":      "2026-12-02_809f9c0_c10k-small",
	"labrun":    "2026-12-06_d7772ed_headline",
	"kentry":    "2026-12-06_d7772ed_kentry",
}

// The tables in results/ are regenerable: for every folder STUDY.md links
// to that a mode reads (what make study rewrites), and a pinned folder of
// each mode, the mode run on a copy of the committed folder writes the
// committed summary.md byte for byte. If this fails after a change to
// scripts/plot, run make study and commit what it rewrote.
func TestCommittedSummariesRegenerate(t *testing.T) {
	skipPNG = true // the tables are what this checks; other tests draw each mode's plots
	defer func() { skipPNG = false }()
	results := filepath.Join("..", "..", "results")
	dirs, err := studyFolders(filepath.Join(results, "STUDY.md"))
	require.NoError(t, err)
	for _, m := range modes {
		run, ok := pinnedRuns[m.flag]
		require.True(t, ok, "no pinned folder for -%s", m.flag)
		dir := filepath.Join(results, run)
		got, ok := modeOf(dir)
		require.True(t, ok && got.flag == m.flag, "results/%s is pinned for -%s, which does not read it", run, m.flag)
		if !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	covered := map[string]bool{}
	for _, dir := range dirs {
		m, ok := modeOf(dir)
		if !ok {
			continue
		}
		covered[m.flag] = true
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			// summary.md names its folder: the copy keeps the name.
			tmp := filepath.Join(t.TempDir(), name)
			require.NoError(t, os.Mkdir(tmp, 0o755))
			ents, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range ents {
				if e.Type().IsRegular() && !strings.HasSuffix(e.Name(), ".png") {
					copyFiles(t, dir, tmp, e.Name())
				}
			}
			require.NoError(t, m.run(tmp))
			want, err := os.ReadFile(filepath.Join(dir, "summary.md"))
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join(tmp, "summary.md"))
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got), "results/%s/summary.md is not what scripts/plot writes: run make study", name)
		})
	}
	for _, m := range modes {
		assert.True(t, covered[m.flag], "no committed folder of -%s checked", m.flag)
	}
}
