package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twinloop/twinloop/scripts/lab"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fixture files are lib.sh make_docroot's: 1500 bytes, 64 KiB, 1 MiB.
func TestMakeDocroot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "www")
	require.NoError(t, makeDocroot(dir))
	for name, size := range map[string]int64{"index.html": 1500, "64k.html": 65536, "1m.html": 1 << 20} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, size, fi.Size(), name)
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.html"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(b), "<!doctype html>\n<title>bench</title>\n<p>twinloop benchmark fixture"))
}

// syscallsPerReq reads twinloop's exit line, not the --stats lines
// before it; the peers have none.
func TestSyscallsPerReq(t *testing.T) {
	log := filepath.Join(t.TempDir(), "server.log")
	require.NoError(t, os.WriteFile(log, []byte("server: serving /www on 127.0.0.1:21000 with backend epoll, 1 loop(s)\n"+
		"server: stats requests=10 syscalls=99\n"+
		"server: stopped; requests=1000 2xx=1000 accepts=50 syscalls=2150 syscalls_per_req=2.15 write=1000 buf_bytes=0 peak RSS 10 MB\n"), 0o644))
	assert.Equal(t, "2.150", (&server{log: log}).syscallsPerReq())
	require.NoError(t, os.WriteFile(log, []byte("gnet: listening\n"), 0o644))
	assert.Equal(t, "", (&server{log: log}).syscallsPerReq())
}

// nginx's config is lib.sh nginx_conf's: the port on 127.0.0.1, the
// docroot, no access log, everything it writes under its folder.
func TestNginxConf(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nginx")
	path, err := nginxConf(dir, 1, "127.0.0.1", 21042, "/srv/www", false, false)
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	conf := string(b)
	for _, want := range []string{"worker_processes 1;", "listen 127.0.0.1:21042 reuseport backlog=4096;", "root /srv/www;",
		"access_log off;", "pid " + dir + "/nginx.pid;", "open_file_cache max=1000 inactive=60s;"} {
		assert.Contains(t, conf, want)
	}
	path, err = nginxConf(dir, 1, "127.0.0.1", 21042, "/srv/www", true, true)
	require.NoError(t, err)
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(b), "access_log "+dir+"/access.log combined;")
	assert.NotContains(t, string(b), "access_log off;")
	assert.Contains(t, string(b), "aio threads;")
}

// cold.lua's done() line, as a cold cell reads it.
func TestParseColdLine(t *testing.T) {
	m, err := parseColdLine([]byte("Running 1s test\ncold: requests=12 bytes=196608 seconds=1.002000 errors=0 status=1\n"))
	require.NoError(t, err)
	assert.Equal(t, 12.0, m["requests"])
	assert.Equal(t, 196608.0, m["bytes"])
	assert.Equal(t, 1.0, m["status"])
	_, err = parseColdLine([]byte("unable to connect"))
	assert.Error(t, err)
}

// Each step that does not fit the machine is named with the reason (the
// run is refused, or -fit leaves it out).
func TestPlaceAll(t *testing.T) {
	p, err := lab.ParseSteps(strings.NewReader("a|epoll|1|first:1|keepalive|1500||x\nb|epoll|4|first:4|keepalive|1500||x\nc|epoll|1|0-2|keepalive|1500||x\n"))
	require.NoError(t, err)
	place, unfit := placeAll(p, []int{0, 1}, "1")
	require.Len(t, unfit, 2)
	assert.Contains(t, unfit[0], "step b needs 5 CPUs")
	assert.Contains(t, unfit[1], "step c runs its server on CPU 2")
	assert.Equal(t, lab.Placement{Server: "0", Client: "1", Threads: 1}, place["a"])
	place, unfit = placeAll(p, []int{0, 1, 2, 3, 4, 5, 6, 7}, "1")
	assert.Empty(t, unfit)
	assert.Equal(t, lab.Placement{Server: "0-3", Client: "4-7", Threads: 4}, place["b"])
}

// procTicks and ctxSwitches read this process's own /proc files.
func TestProcMeters(t *testing.T) {
	pid := os.Getpid()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	for i := 0; i < 3e7; i++ { // some CPU time to count
		_ = i * i
	}
	assert.Greater(t, ctxSwitches([]int{pid}), uint64(0))
	assert.Greater(t, peakRSSKB([]int{pid}), uint64(0))
	assert.Equal(t, uint64(0), procTicks([]int{1 << 30}), "a process that does not exist counts nothing")
}
