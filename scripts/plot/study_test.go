package main

import (
	"bytes"
	"os"
	"path/filepath"
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
		"skip "+filepath.Join(root, "hand")+": no mode reads it (no summary.csv, cold.csv, sizes.txt, c10k.tsv in a schema scripts/plot knows)\n"+
		"plot -ladder -dir "+filepath.Join(root, "ladder")+"\n", log.String())
	for _, f := range []string{"grid-run/summary.md", "grid-run/rps_vs_conns.png", "ladder/summary.md", "ladder/attribution.png"} {
		assert.FileExists(t, filepath.Join(root, f))
	}
	assert.NoFileExists(t, filepath.Join(root, "hand", "summary.md"))
}
