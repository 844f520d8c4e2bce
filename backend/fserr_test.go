package backend_test

// What a client is told, and what the error log says, when the file
// system fails with an error that is neither a missing file nor a refusal:
// EIO (500), and a mount whose daemon or server is gone, ENOTCONN (503,
// as at --fs-timeout). The failures are injected through
// core.Config.WrapFileCalls, so they reach the helpers' loads: on the
// backends that have helpers (the blocking backend loads inline).

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// failingFS fails every open of a path in fail with its errno.
type failingFS struct {
	core.FileCalls
	fail map[string]unix.Errno
}

func (f *failingFS) Openat2(dirfd int, path string, how *unix.OpenHow) (int, error) {
	if e, ok := f.fail[path]; ok {
		return -1, e
	}
	return f.FileCalls.Openat2(dirfd, path, how)
}

func TestFileSystemErrorsAnsweredAndLogged(t *testing.T) {
	for _, nb := range suiteBackends() {
		t.Run(nb.name, func(t *testing.T) {
			parallel(t)
			skipOneAtATime(t, "it loads inline, not through the helpers' FileCalls")
			s := makeSite(t)
			for _, d := range []string{"broken", "gone"} {
				require.NoError(t, os.MkdirAll(filepath.Join(s.dir, d), 0o755))
			}
			elog := &servertest.Buffer{}
			cfg := core.Config{Dir: s.dir, AutoIndex: true, ErrorLog: elog}
			cfg.WrapFileCalls = func(fc core.FileCalls) core.FileCalls {
				return &failingFS{FileCalls: fc, fail: map[string]unix.Errno{"broken": unix.EIO, "gone": unix.ENOTCONN}}
			}
			srv := servertest.Start(t, nb.b, cfg, 1)
			c := servertest.Dial(t, srv.Addr)

			// A listing goes to a helper (getdents64 has no form that
			// does not wait), whose open fails.
			resp, _ := c.Get("/broken/")
			assert.Equal(t, 500, resp.StatusCode, "EIO")
			resp, body := c.Get("/index.html")
			require.Equal(t, 200, resp.StatusCode, "the connection goes on after a 500")
			assert.Equal(t, s.index, body)
			require.Eventually(t, func() bool {
				return strings.Contains(elog.String(), `twinloop: "/broken/": input/output error: answered 500`+"\n")
			}, 5*time.Second, 10*time.Millisecond, "logged with its path and errno: %q", elog.String())

			// Past the log's second, so that this one is not folded into
			// the count of the next line.
			time.Sleep(time.Second)
			resp, _ = c.Get("/gone/")
			assert.Equal(t, 503, resp.StatusCode, "ENOTCONN: the mount may come back")
			assert.Equal(t, "5", resp.Header.Get("Retry-After"))
			require.Eventually(t, func() bool {
				return strings.Contains(elog.String(), `twinloop: "/gone/": transport endpoint is not connected: answered 503`+"\n")
			}, 5*time.Second, 10*time.Millisecond, "logged: %q", elog.String())

			// Within a second, a burst is one line and a count.
			for range 3 {
				resp, _ = c.Get("/broken/")
				assert.Equal(t, 500, resp.StatusCode)
			}
			time.Sleep(time.Second)
			resp, _ = c.Get("/broken/")
			assert.Equal(t, 500, resp.StatusCode)
			require.Eventually(t, func() bool {
				return strings.Count(elog.String(), "\n") == 3
			}, 5*time.Second, 10*time.Millisecond, "%q", elog.String())
			assert.Contains(t, elog.String(), fmt.Sprintf(`twinloop: "/broken/": input/output error: answered 500 (and %d such errors in the second before, not logged)`, 3))
		})
	}
}
