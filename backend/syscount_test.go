package backend_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The loops' counters agree with strace call for call (make syscalls: labrun -strace)
// only if no call is made past the wrappers that count it. These checks
// read the sources of the loops and of the core:
//
//   - a syscall counter is incremented only in a file named sys_linux.go
//     (backend/internal/loops, a backend's own, core's), and the io_uring
//     SQE and CQE counters in one place each;
//   - a call into the kernel (unix.X, syscall.X, a giouring call that
//     enters it) outside those files carries a "// uncounted" comment on
//     its line that says why it is not a loop's (Probe, setup, teardown,
//     another goroutine), so that a new call site either goes through a
//     wrapper or says why not.
//
// backend/listen is left out: it opens the listeners before any loop runs.

var (
	countRE = regexp.MustCompile(`\bSyscalls\[[^\]]*\]\s*(\+\+|\+=)`)
	sqeRE   = regexp.MustCompile(`\[ownSQEs\]\s*(\+\+|\+=)`)
	cqeRE   = regexp.MustCompile(`\[ownCQEs\]\s*(\+\+|\+=)`)
	// callRE finds calls of package unix and syscall functions, and of the
	// giouring methods that enter the kernel.
	callRE = regexp.MustCompile(`\b(?:unix|syscall)\.([A-Z]\w*)\(|\.(QueueInit|QueueExit|GetProbeRing|Register\w*|Unregister\w*|Submit\w*|WaitCQE\w*)\(`)
)

// pure are the unix and syscall functions (and conversions) that make no
// system call.
var pure = map[string]bool{
	"Errno": true, "Signal": true, "NsecToTimespec": true, "NsecToTimeval": true,
	"ParseDirent": true, "WaitStatus": true,
}

// loopSources are the non-test Go files of the loops and the core, by path
// from backend/.
func loopSources(t *testing.T) []string {
	var files []string
	for _, dir := range []string{"epoll", "uring", "poll", "blocking", "internal/loops", "../core"} {
		m, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, f := range m {
			if !strings.HasSuffix(f, "_test.go") {
				files = append(files, f)
			}
		}
	}
	require.NotEmpty(t, files)
	return files
}

func TestSyscallsCountedInWrappers(t *testing.T) {
	var sqes, cqes []string
	for _, f := range loopSources(t) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		wrappers := filepath.Base(f) == "sys_linux.go"
		for i, line := range strings.Split(string(b), "\n") {
			code, comment, _ := strings.Cut(line, "//")
			at := f + ":" + strconv.Itoa(i+1)
			if countRE.MatchString(code) && !wrappers && f != "../core/stats.go" {
				t.Errorf("%s: a syscall counted by hand; make the call through a wrapper that counts it (loops.Sys, sys_linux.go): %s", at, strings.TrimSpace(line))
			}
			if sqeRE.MatchString(code) {
				sqes = append(sqes, at)
			}
			if cqeRE.MatchString(code) {
				cqes = append(cqes, at)
			}
			if wrappers || strings.Contains(comment, "uncounted") {
				continue
			}
			for _, m := range callRE.FindAllStringSubmatch(code, -1) {
				if m[1] != "" && pure[m[1]] {
					continue
				}
				t.Errorf("%s: a system call past the counting wrappers; call it through one (loops.Sys, sys_linux.go), or say why it is not a loop's with a // uncounted comment: %s", at, strings.TrimSpace(line))
			}
		}
	}
	assert.Len(t, sqes, 1, "SQEs are counted in one place (uring's ring.enter): %v", sqes)
	assert.Len(t, cqes, 1, "CQEs are counted in one place (uring's reap): %v", cqes)
}
