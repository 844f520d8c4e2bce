package backend_test

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend"
	"github.com/twinloop/twinloop/backend/listen"
	"github.com/twinloop/twinloop/core"
	"github.com/twinloop/twinloop/internal/servertest"
)

// With and without TCP_DEFER_ACCEPT (on unless --no-defer-accept), on
// every backend: a client that connects and says nothing for a while, one
// that sends its head in pieces, a Connection: close request and two
// keep-alive requests are all answered, and the server then serves the
// next client. Without the option a connection is accepted before its
// data, so the loops' first read of it finds nothing.
func TestAcceptWithAndWithoutDefer(t *testing.T) {
	for _, b := range backend.All() {
		for _, deferAccept := range []bool{false, true} {
			name := b.Name() + "/nodefer"
			if deferAccept {
				name = b.Name() + "/defer"
			}
			t.Run(name, func(t *testing.T) {
				s := makeSite(t)
				srv := servertest.StartWith(t, b, core.Config{Dir: s.dir}, 1, "127.0.0.1:0", listen.Options{DeferAccept: deferAccept})

				quiet := servertest.Dial(t, srv.Addr)
				time.Sleep(300 * time.Millisecond)
				_, err := io.WriteString(quiet, "GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n")
				require.NoError(t, err)
				resp, got := quiet.ReadResponse("GET")
				require.Equal(t, 200, resp.StatusCode)
				require.True(t, bytes.Equal(s.index, got))
				quiet.Close() // the blocking backend serves one connection at a time

				pieces := servertest.Dial(t, srv.Addr)
				for _, p := range []string{"GET /ind", "ex.html HTTP/1.1\r\n", "Host: t\r\n", "\r\n"} {
					_, err := io.WriteString(pieces, p)
					require.NoError(t, err)
					time.Sleep(20 * time.Millisecond)
				}
				resp, got = pieces.ReadResponse("GET")
				require.Equal(t, 200, resp.StatusCode)
				require.True(t, bytes.Equal(s.index, got))
				pieces.Close()

				closer := servertest.Dial(t, srv.Addr)
				_, err = io.WriteString(closer, "GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
				require.NoError(t, err)
				resp, got = closer.ReadResponse("GET")
				require.Equal(t, 200, resp.StatusCode)
				assert.True(t, resp.Close)
				require.True(t, bytes.Equal(s.index, got))
				assert.True(t, closer.Closed(), "the connection is closed after Connection: close")

				keep := servertest.Dial(t, srv.Addr)
				for range 2 {
					resp, got = keep.Get("/index.html")
					require.Equal(t, 200, resp.StatusCode)
					require.True(t, bytes.Equal(s.index, got))
				}
				keep.Close()

				// The server is still whole: a quiet connection that leaves
				// costs it nothing, and the next client is served.
				gone, err := net.Dial("tcp", srv.Addr)
				require.NoError(t, err)
				gone.Close()
				resp, got = servertest.Dial(t, srv.Addr).Get("/index.html")
				require.Equal(t, 200, resp.StatusCode)
				require.True(t, bytes.Equal(s.index, got))
			})
		}
	}
}
