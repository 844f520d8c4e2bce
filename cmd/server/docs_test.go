package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flagsPage is docs/flags.md: --help as it prints now, every group, the
// lab's included.
func flagsPage(help string) string {
	return "# twinloop's flags\n\n" +
		"`server --help` as it prints now, every group, the operator's first and the\n" +
		"lab's last. Written by `make docs`; cmd/server's TestFlagsPage fails when\n" +
		"this page and `--help` differ. [reference.md](reference.md) tells each\n" +
		"flag's story, and [lab.md](lab.md) what the lab's switches are for.\n\n" +
		"```text\n" + help + "```\n"
}

// TestFlagsPage: docs/flags.md is what --help prints, so that it cannot
// go stale. TWINLOOP_WRITE_DOCS=1 (make docs) writes it first.
func TestFlagsPage(t *testing.T) {
	code, help, errs := runMain("--help")
	require.Equal(t, 0, code, errs)
	want := flagsPage(help)
	const page = "../../docs/flags.md"
	if os.Getenv("TWINLOOP_WRITE_DOCS") == "1" {
		require.NoError(t, os.WriteFile(page, []byte(want), 0o644))
	}
	got, err := os.ReadFile(page)
	require.NoError(t, err, "run make docs")
	assert.Equal(t, want, string(got), "docs/flags.md is not what server --help prints: run make docs")
}

// TestReadmeFrontDoor (issue 38): the README is at most 300 lines and
// keeps what a newcomer needs first: the two commands, the reading
// order, the section on running behind a balancer, and the way to docs/.
func TestReadmeFrontDoor(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(b)
	assert.LessOrEqual(t, strings.Count(readme, "\n"), 300)
	for _, s := range []string{
		"make run    # builds bin/server and serves the sample site ./www on :8080\n",
		"make test   # every test, with the race detector",
		"## Reading order", "(core/backend.go)", "backend/*/doc.go", "(results/STUDY.md)",
		"## Behind a balancer\n",
		"(docs/reference.md)", "(docs/flags.md)", "(docs/lab.md)",
	} {
		assert.Contains(t, readme, s)
	}
}

// TestDocLinks: every relative link of the README and docs/ names a file
// that exists, so that moving a section cannot leave a dead link behind.
func TestDocLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	pages, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	for _, page := range append(pages, "../../README.md", "../../deploy/README.md") {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") {
				continue
			}
			_, err := os.Stat(filepath.Join(filepath.Dir(page), target))
			assert.NoError(t, err, "%s links to %s", page, m[1])
		}
	}
}
