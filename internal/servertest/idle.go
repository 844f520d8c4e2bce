package servertest

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/core"
)

// WaitsWhileIdle checks that backend b's loop sleeps, and does not spin,
// while a client that shut down its write side (its socket readable at
// EOF on every pass) waits for a CGI script's late answer: at most 20
// calls of the loop's wait (counter wait: SysEpollWait, SysPoll) in a
// window of a second, then the answer whole. The counters are published
// once a second: the first snapshot that shows the request taken, then
// one a second or more later. The sleep is the window measured, not a
// wait for an event.
func WaitsWhileIdle(t *testing.T, b core.Backend, wait core.Sys) {
	t.Helper()
	dir := Site(t, map[string][]byte{"index.html": make([]byte, 1500)})
	cgi := Scripts(t, map[string]string{"slow": "sleep 3\nprintf 'Content-Type: text/plain\\n\\nlate'\n"})
	srv := Start(t, b, core.Config{Dir: dir, CGIDir: cgi}, 1)
	c := Dial(t, srv.Addr)
	fmt.Fprintf(c, "GET /cgi-bin/slow HTTP/1.1\r\nHost: t\r\n\r\n")
	require.NoError(t, c.Conn.(*net.TCPConn).CloseWrite())
	before := srv.WaitStats(func(st *core.Stats) bool { return st.BytesIn > 0 }).Syscalls[wait]
	time.Sleep(1100 * time.Millisecond)
	waits := srv.Core.Stats().Syscalls[wait] - before
	assert.Less(t, waits, uint64(20), "the loop's waits in a second of waiting")
	require.Equal(t, "HTTP/1.1 100 Continue", c.ReadRaw("GET").Status)
	resp, body := c.ReadResponse("GET")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "late", string(body))
	require.NoError(t, srv.Stop())
}
