package core

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestOpenStatus(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		logged bool
	}{
		{unix.ENOENT, 404, false},
		{unix.ENOTDIR, 404, false},
		{unix.EACCES, 403, false},
		{unix.EXDEV, 403, false},
		{errSpecial, 403, false},
		{unix.EAGAIN, 503, false}, // --fs-timeout's, logged by nobody: it is not an error of the file
		{errChanged, 503, false},
		{errShrank, 503, false},
		{unix.ECANCELED, 503, false}, // its loop is closing
		{unix.EMFILE, 503, true},
		{unix.ENOTCONN, 503, true},
		{unix.ETIMEDOUT, 503, true},
		{unix.EINTR, 503, true},
		{unix.EIO, 500, true},
		{unix.ESTALE, 500, true},
	} {
		s := openStatus(c.err)
		assert.Equal(t, c.status, s, "%v", c.err)
		assert.Equal(t, c.logged, logged(c.err, s), "%v logged", c.err)
	}
}

// shortReads is DirectCalls whose reads find the file's end at once: a
// file truncated between its stat and its read.
type shortReads struct{ DirectCalls }

func (shortReads) Pread(int, []byte, int64) (int, error) { return 0, nil }

func TestLoadOfFileThatShrankIs503AndLogged(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), bytes.Repeat([]byte("a"), 100), 0o644))
	root, err := openRoot(dir)
	require.NoError(t, err)
	defer closeFD(root)
	var log bytes.Buffer
	done := make(chan struct{})
	elog := &errorLog{w: writerFunc(func(p []byte) (int, error) { defer close(done); return log.Write(p) })}
	cfg := DefaultConfig
	ld := &loader{root: root, cfg: &cfg, elog: elog, fs: helperFS{fc: shortReads{}, direct: true, calls: new([NumSys]uint64), localRoot: -1}}
	f, status := ld.load("a.txt", false)
	assert.Nil(t, f)
	assert.Equal(t, 503, status, "answered as a file replaced while opened")
	assert.False(t, logged(errShrank, status), "not logged: nothing is wrong with the file system")

	// EIO is logged, with the path.
	ld.fs = helperFS{fc: failingReads{}, direct: true, calls: new([NumSys]uint64), localRoot: -1}
	f, status = ld.load("a.txt", false)
	assert.Nil(t, f)
	assert.Equal(t, 500, status)
	<-done
	assert.Equal(t, `twinloop: "/a.txt": input/output error: answered 500`+"\n", log.String())
	assert.False(t, strings.Contains(log.String(), "shrank"))
}

type failingReads struct{ DirectCalls }

func (failingReads) Pread(int, []byte, int64) (int, error) { return 0, unix.EIO }

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }
