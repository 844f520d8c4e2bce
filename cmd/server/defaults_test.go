package main

import (
	"fmt"
	"runtime"
	"testing"

	flags "github.com/jessevdk/go-flags"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend/epoll"
	"github.com/twinloop/twinloop/internal/servertest"
)

// parse parses args as the command line does, with the flags' defaults.
func parse(t *testing.T, args ...string) *options {
	t.Helper()
	var o options
	_, err := flags.NewParser(&o, flags.None).ParseArgs(args)
	require.NoError(t, err, args)
	require.NoError(t, o.check(), args)
	return &o
}

// TestMaxBodyZero: --max-body 0 means no request body at all (413), not
// the default limit; the default is 1 MiB.
func TestMaxBodyZero(t *testing.T) {
	dir := servertest.Site(t, map[string]string{"index.html": "hi"})
	for _, tc := range []struct {
		args   []string
		status string
	}{
		{args: []string{"--max-body", "0"}, status: "413"},
		{args: nil, status: "405"},
	} {
		cfg := parse(t, append(tc.args, "-d", dir)...).config(nil)
		srv := servertest.Start(t, epoll.New(), cfg, 1)
		c := servertest.Dial(t, srv.Addr)
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx")
		assert.Equal(t, "HTTP/1.1 "+tc.status, c.ReadRaw("POST").Status[:12], tc.args)
	}
}

// TestLoopsDefault: one loop per CPU the process may use (GOMAXPROCS,
// which follows the cgroup's CPU limit), not per CPU of the host.
func TestLoopsDefault(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	assert.Equal(t, 1, parse(t).loops())
	assert.Equal(t, 3, parse(t, "--loops", "3").loops())
}
