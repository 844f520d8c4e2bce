package servertest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/core"
)

// KeepAliveCounts serves n keep-alive GETs of a cached 1500-byte page with
// backend b (one loop), stops the server and returns its counters, after
// checking what every readiness backend's small hit costs: one write per
// response, one read per request (the EOF read and the probe dial add a
// few), the file opened once (O_PATH for its type, then for reading) and
// no sendfile or sendto: the small body goes with its header in that one
// write. The caller checks its backend's own waits.
func KeepAliveCounts(t *testing.T, b core.Backend, n int) core.Stats {
	t.Helper()
	dir := Site(t, map[string][]byte{"index.html": make([]byte, 1500)})
	srv := Start(t, b, core.Config{Dir: dir}, 1)
	c := Dial(t, srv.Addr)
	for range n {
		c.Get("/index.html")
	}
	c.Close()
	require.NoError(t, srv.Stop())
	st := srv.Core.Stats()
	require.Equal(t, uint64(n), st.Requests)
	assert.Equal(t, uint64(n), st.Syscalls[core.SysWrite], "one write per response")
	assert.LessOrEqual(t, st.Syscalls[core.SysRead], uint64(n+5), "one read per request")
	assert.LessOrEqual(t, st.Syscalls[core.SysOpen], uint64(2), "the file is opened once (O_PATH for its type, then for reading)")
	assert.Zero(t, st.Syscalls[core.SysSendfile]+st.Syscalls[core.SysSendto], "no header apart, no sendfile")
	return st
}
