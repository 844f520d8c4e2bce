package main

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelpReadable (issue 38): --help is at most 300 lines in at least 4
// groups, the operator's before the lab's, at most 80 columns wide
// whatever the terminal.
func TestHelpReadable(t *testing.T) {
	code, out, errs := runMain("--help")
	require.Equal(t, 0, code, errs)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	assert.LessOrEqual(t, len(lines), 300, "--help is %d lines", len(lines))
	var groups []string
	header := regexp.MustCompile(`^[A-Z][^ ].*:$`)
	for _, l := range lines {
		if header.MatchString(l) && l != "Usage:" {
			groups = append(groups, strings.TrimSuffix(l, ":"))
		}
		assert.LessOrEqual(t, utf8.RuneCountInString(l), helpWidth, "too wide: %q", l)
	}
	assert.GreaterOrEqual(t, len(groups), 4, "groups: %q", groups)
	assert.Equal(t, []string{"Listening", "Files and caching", "Responses", "Request limits", "Timeouts and shutdown",
		"Logging and metrics", "Behind a proxy", "CGI", "Configuration file",
		"Lab: ablations, every backend", "Lab: epoll ablations", "Lab: io_uring ablations", "Lab: io_uring features", "Help Options"}, groups)
	// Every group's flags follow its header: --port under Listening, the
	// io_uring features under theirs.
	assert.Regexp(t, `(?s)\nListening:\n.*-p, --port=N\n.*\nFiles and caching:\n`, out)
	assert.Regexp(t, `(?s)\nLab: io_uring features:\n.*--uring-fixed-files=\[on\|off\]\n.*\nHelp Options:\n`, out)

	code, short, _ := runMain("-h")
	assert.Equal(t, 0, code)
	assert.Equal(t, out, short)
}
