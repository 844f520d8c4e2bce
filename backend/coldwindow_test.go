package backend_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// TestColdWindowBodiesOffLoop: within the server's cold window (a loop met
// a cold part lately, core.ColdWindow), a body whose file cachestat finds
// in the page cache is still read by no call on the loop's thread: a page
// it counts may be under read, or leave the cache before the call, and a
// sendfile would then read the disk on the loop. Here the file is evicted
// (POSIX_FADV_DONTNEED) after the loop chose how to send it: on epoll and
// poll (loops.Bodies) from the helper that reads the part, which holds
// its read while the loop answers another connection; on io_uring before
// the request, its pages gone between its two bodies' plans. The body
// arrives whole and exact, and no backend made a sendfile. The blocking
// backend reads inline by design, and is left out.
func TestColdWindowBodiesOffLoop(t *testing.T) {
	var bs []namedBackend
	for _, nb := range suiteBackends() {
		if nb.name != "blocking" {
			bs = append(bs, nb)
		}
	}
	eachOf(t, bs, core.Config{}, 1, func(t *testing.T, s *site, srv *servertest.Server) {
		helpers := strings.HasSuffix(t.Name(), "/epoll") || strings.HasSuffix(t.Name(), "/poll")
		body := make([]byte, 1<<20+321) // five helper reads
		rand.Read(body)
		path := filepath.Join(s.dir, "cold.bin")
		require.NoError(t, os.WriteFile(path, body, 0o644))
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()
		require.NoError(t, f.Sync())
		evict := func() { unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) }

		// Every helper's read keeps the window open and evicts the file
		// first; the first one waits for release.
		entered, release := make(chan struct{}), make(chan struct{})
		var reads atomic.Int32
		loops.ReadaheadHook = func() {
			srv.Core.Cold.Note(time.Now())
			evict()
			if reads.Add(1) == 1 {
				close(entered)
				<-release
			}
		}
		t.Cleanup(func() { loops.ReadaheadHook = nil })

		hot := servertest.Dial(t, srv.Addr)
		_, got := hot.Get("/index.html")
		require.Equal(t, s.index, got)

		srv.Core.Cold.Note(time.Now())
		cold := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(cold, "GET /cold.bin HTTP/1.1\r\nHost: t\r\n\r\n")
		if helpers {
			select {
			case <-entered:
			case <-time.After(10 * time.Second):
				t.Fatal("no helper read the cached body's part within the cold window")
			}
			for range 3 {
				resp, got := hot.Get("/index.html")
				require.Equal(t, 200, resp.StatusCode)
				require.Equal(t, s.index, got, "answered while the body's read is held")
			}
		}
		close(release)
		resp, got := cold.ReadResponse("GET")
		require.Equal(t, 200, resp.StatusCode)
		require.True(t, bytes.Equal(body, got), "the body, byte for byte (%d bytes of %d)", len(got), len(body))

		// Again, evicted now: io_uring's planner meets it cold.
		srv.Core.Cold.Note(time.Now())
		evict()
		resp, got = cold.Get("/cold.bin")
		require.Equal(t, 200, resp.StatusCode)
		require.True(t, bytes.Equal(body, got), "the body again, byte for byte (%d bytes of %d)", len(got), len(body))
		require.NoError(t, srv.Stop())
		st := srv.Core.Stats()
		assert.Zero(t, st.Syscalls[core.SysSendfile], "no sendfile on the loop within the cold window")
		if helpers {
			assert.GreaterOrEqual(t, st.Own[loops.OwnReadaheads], int64(10), "each part read by a helper")
			assert.Zero(t, st.Own[loops.OwnReadaheadsInline])
		}
	})
}
