package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend/uring"
	"github.com/twinloop/twinloop/internal/servertest"
)

// TestStartChecks (issue 38): what would start and then not do what the
// operator asked is refused at start, exit status 2, in one line that
// says why and what to change.
func TestStartChecks(t *testing.T) {
	dir := servertest.Site(t, map[string]string{"index.html": "hi", "sub/index.html": "sub"})
	const uringOnly = "needs --backend=uring (or auto on a kernel that has it)"
	const epollOnly = "needs --backend=epoll (or auto on a kernel without io_uring)"
	for _, tc := range []struct {
		args []string
		says []string
	}{
		// An error page that is a directory.
		{args: []string{"--error-page", "404=/sub"},
			says: []string{"--error-page 404=/sub: " + filepath.Join(dir, "sub") + " is a directory, and an error page is a file: give one, such as 404=/sub/index.html or 404=/404.html"}},
		{args: []string{"--error-page", "404=/404.html", "--error-page", "503=/sub/"},
			says: []string{"--error-page 503=/sub/: ", "is a directory", "such as 503=/sub/index.html"}},
		// A lab flag the named backend ignores.
		{args: []string{"--backend=epoll", "--uring-send-zc=65536"},
			says: []string{"--uring-send-zc=65536 " + uringOnly + "; --backend=epoll ignores it: drop it, or change --backend"}},
		{args: []string{"--backend=epoll", "--uring-fixed-files=on", "--uring-sqpoll=1"},
			says: []string{"--uring-sqpoll=1 and --uring-fixed-files=on need --backend=uring (or auto on a kernel that has it); --backend=epoll ignores them"}},
		{args: []string{"--backend=blocking", "--uring-body=read", "--uring-wait=spin", "--uring-multishot=off"},
			says: []string{"--uring-multishot=off, --uring-body=read and --uring-wait=spin need --backend=uring", "--backend=blocking ignores them"}},
		{args: []string{"--backend=poll", "--epoll-trigger=level"},
			says: []string{"--epoll-trigger=level " + epollOnly + "; --backend=poll ignores it: drop it, or change --backend"}},
		{args: []string{"--backend=uring", "--epoll-cork=on"},
			says: []string{"--epoll-cork=on " + epollOnly + "; --backend=uring ignores it: drop it"}},
		{args: []string{"--backend=blocking", "--epoll-trigger=level", "--uring-batch=off"},
			says: []string{"--uring-batch=off " + uringOnly + "; --epoll-trigger=level " + epollOnly + "; --backend=blocking ignores them"}},
		// A --header pattern that can never match.
		{args: []string{"--header", "/**/../x=X-A: b"},
			says: []string{`--header "/**/../x=X-A: b": pattern "/**/../x" can never match: request paths are cleaned before they are matched, so none has a ".." segment; write it as a cleaned path reads, such as /x`}},
		{args: []string{"--header", "/a//b=X-A: b"}, says: []string{"none has an empty segment (//)"}},
		{args: []string{"--header", "/.git/**=X-A: b"}, says: []string{`".git" is a hidden name`}},
	} {
		code, out, errs := runMain(append(tc.args, "-d", dir)...)
		assert.Equal(t, 2, code, tc.args)
		assert.Empty(t, out, tc.args)
		assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q", errs)
		assert.True(t, strings.HasPrefix(errs, "server: "), errs)
		for _, s := range tc.says {
			assert.Contains(t, errs, s, tc.args)
		}
	}

	// What passes: a lab flag at its default, or with its own backend;
	// an error page that is a file, or not there yet (the built-in page
	// until it is).
	for _, args := range [][]string{
		{"--backend=epoll", "--uring-batch=on", "--uring-sqpoll=off", "--uring-send-zc=off"},
		{"--backend=epoll", "--epoll-cork=on", "--epoll-trigger=level"},
		{"--backend=uring", "--uring-fixed-files=on", "--epoll-trigger=edge"},
		{"--backend=blocking", "--sendfile=never", "--no-keepalive"},
		{"--backend=auto", "--epoll-cork=on", "--uring-send-zc=65536"},
		{"--error-page", "404=/sub/index.html", "--error-page", "503=/later.html"},
		{"--header", "/.well-known/**=X-A: b", "--header", "/sub/=X-A: b"},
	} {
		parse(t, append(args, "-d", dir)...)
	}
}

// TestAutoWarnsOfIgnoredFlags: with --backend=auto, a lab flag of the
// backend auto did not choose is warned about on stderr, in one line
// before the server says it serves, and the server serves.
func TestAutoWarnsOfIgnoredFlags(t *testing.T) {
	dir := servertest.Site(t, map[string]string{"index.html": "hi"})
	flag, chosen, needs := "--epoll-trigger=level", "uring", "--backend=epoll (or auto on a kernel without io_uring)"
	if err := uring.New().Probe(); err != nil {
		flag, chosen, needs = "--uring-batch=off", "epoll", "--backend=uring (or auto on a kernel that has it)"
	}
	addr := "127.0.0.1:" + freePort(t)
	_, _, stderr := server(t, "--backend=auto", flag, "--listen", addr, "-d", dir, "--loops", "1")
	servertest.WaitAccepting(t, addr)
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "server: serving") }, 5*time.Second, 10*time.Millisecond, stderr.String())
	warning := "server: warning: " + flag + " needs " + needs + "; --backend=auto chose " + chosen + " here, which ignores it: serving without it (name the backend to be refused instead of warned)\n"
	assert.Contains(t, stderr.String(), warning)
	assert.Less(t, strings.Index(stderr.String(), warning), strings.Index(stderr.String(), "server: serving"))
}
