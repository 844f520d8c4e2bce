package core

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConnInterest walks a Conn through every state and checks exactly
// what a backend is told to watch in each (Interest), beside what Next
// says to do now.
func TestConnInterest(t *testing.T) {
	cgi := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cgi, "wait"), []byte("#!/bin/sh\nexec sleep 30\n"), 0o755))
	l, _ := newTestLoop(t, Config{CGIDir: cgi, InBufMax: 1024, CGITimeout: 5 * time.Second})
	l.Tick(time.Now())
	check := func(t *testing.T, c *Conn, state connState, next Action, want Interest) {
		t.Helper()
		assert.Equal(t, state, c.state, "state")
		assert.Equal(t, next, c.Next(), "Next")
		assert.Equal(t, want, c.Interest(), "Interest")
	}
	none := Interest{Read: true, Pipe: -1}

	t.Run("reading, writing, reading", func(t *testing.T) {
		c := l.NewConn(netipNone)
		check(t, c, stateReading, ActRead, none)
		c.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
		check(t, c, stateWriting, ActWrite, Interest{Read: true, Write: true, Pipe: -1})
		drain(c)
		check(t, c, stateReading, ActRead, none)
		l.FreeConn(c)
	})
	t.Run("writing with InBufMax waiting behind a file body", func(t *testing.T) {
		c := l.NewConn(netipNone)
		c.Feed([]byte("GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nX: " + strings.Repeat("x", 1100)))
		check(t, c, stateWriting, ActWrite, Interest{Write: true, Pipe: -1})
		l.FreeConn(c)
	})
	t.Run("body, held and with 100 Continue", func(t *testing.T) {
		c := l.NewConn(netipNone)
		c.Feed([]byte("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc"))
		check(t, c, stateBody, ActRead, none)
		l.FreeConn(c)
		c = l.NewConn(netipNone)
		c.Feed([]byte("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n"))
		check(t, c, stateBody, ActWrite, Interest{Read: true, Write: true, Pipe: -1})
		drain(c)
		check(t, c, stateBody, ActRead, none)
		l.FreeConn(c)
	})
	t.Run("body for a script, then running", func(t *testing.T) {
		c := l.NewConn(netipNone)
		c.Feed([]byte("POST /cgi-bin/wait HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n"))
		require.NotNil(t, c.cgi)
		pipe := c.cgi.pipe
		require.GreaterOrEqual(t, pipe, 0)
		check(t, c, stateBody, ActRead, Interest{Read: true, Pipe: pipe, PipeRead: true})
		c.Feed([]byte("abc"))
		check(t, c, stateRunning, ActRead, Interest{Read: true, Pipe: pipe, PipeRead: true})
		l.FreeConn(c)
	})
	t.Run("running: output backs up, drains, ends; the next script", func(t *testing.T) {
		c := l.NewConn(netipNone)
		c.Feed([]byte("GET /cgi-bin/wait HTTP/1.1\r\nHost: a\r\n\r\nGET /cgi-bin/wait HTTP/1.1\r\nHost: a\r\n\r\n"))
		pipe := c.cgi.pipe
		check(t, c, stateRunning, ActRead, Interest{Read: true, Pipe: pipe, PipeRead: true})
		c.FeedPipe([]byte("Content-Type: text/plain\n\n" + strings.Repeat("o", 70<<10)))
		check(t, c, stateRunning, ActWrite, Interest{Read: true, Write: true, Pipe: pipe})
		drain(c)
		check(t, c, stateRunning, ActRead, Interest{Read: true, Pipe: pipe, PipeRead: true})
		// The end of its output: the last chunk, then the next request,
		// whose script gets a new pipe, which may have the same fd number.
		c.PipeEOF()
		check(t, c, stateWriting, ActWrite, Interest{Read: true, Write: true, Pipe: -1})
		drain(c)
		require.NotNil(t, c.cgi)
		require.GreaterOrEqual(t, c.cgi.pipe, 0)
		check(t, c, stateRunning, ActRead, Interest{Read: true, Pipe: c.cgi.pipe, PipeRead: true})
		c.PipeEOF() // no header: 502
		check(t, c, stateWriting, ActWrite, Interest{Read: true, Write: true, Pipe: -1})
		l.FreeConn(c)
	})
	t.Run("running past its deadline: 504, the pipe left unread", func(t *testing.T) {
		c := l.NewConn(netipNone)
		c.Feed([]byte("GET /cgi-bin/wait HTTP/1.1\r\nHost: a\r\n\r\n"))
		pipe := c.cgi.pipe
		l.Tick(l.Now().Add(6 * time.Second))
		require.Equal(t, ActWrite, c.CheckTimeout())
		check(t, c, stateWriting, ActWrite, Interest{Read: true, Write: true, Pipe: pipe})
		drain(c)
		check(t, c, stateClosing, ActLinger, Interest{Read: true, Pipe: pipe})
		l.FreeConn(c)
	})
	t.Run("closing, lingering", func(t *testing.T) {
		c := l.NewConn(netipNone)
		c.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"))
		drain(c)
		check(t, c, stateClosing, ActClose, none) // read on: input that came would turn the close into a RST
		c.Unread()
		check(t, c, stateClosing, ActLinger, none)
		c.Linger()
		check(t, c, stateLingering, ActRead, none)
		l.FreeConn(c)
		c = l.NewConn(netipNone)
		c.EOF()
		check(t, c, stateClosing, ActClose, Interest{Pipe: -1})
		l.FreeConn(c)
	})
}
