package servertest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Client is a raw connection to a server under test. What a test writes
// goes to the socket as it is (fmt.Fprintf(c, ...), c.Write); what it
// reads comes through one buffer, R, so that bytes read ahead (a
// pipelined response, the server's close) wait there for the next read.
// The methods that return no error fail the test on one, with require:
// called from a goroutine other than the test's, they mark the test
// failed and end only that goroutine.
type Client struct {
	net.Conn               // the socket: write to it; never read from it directly
	R        *bufio.Reader // buffers what the server sent; may be replaced before the first read
	t        testing.TB
}

// Dial connects to addr (within 5 s), gives the connection 20 s to live,
// and closes it when the test ends.
func Dial(t testing.TB, addr string) *Client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	return NewClient(t, c)
}

// NewClient makes a Client of a connection dialled some other way (a
// small receive buffer: internal/slowclient). The Client owns c: it is
// closed when the test ends. Deadlines are the caller's.
func NewClient(t testing.TB, c net.Conn) *Client {
	t.Cleanup(func() { c.Close() })
	return &Client{Conn: c, R: bufio.NewReader(c), t: t}
}

// Read reads through R, so that Client is an io.Reader that loses nothing
// the buffer holds.
func (c *Client) Read(p []byte) (int, error) { return c.R.Read(p) }

// ReadResponse reads one response with net/http's parser and all of its
// body; method says whether one follows (none after HEAD).
func (c *Client) ReadResponse(method string) (*http.Response, []byte) {
	c.t.Helper()
	resp, err := http.ReadResponse(c.R, &http.Request{Method: method})
	require.NoError(c.t, err)
	body, err := ReadBody(resp)
	require.NoError(c.t, err)
	resp.Body.Close()
	return resp, body
}

// ReadBody reads resp's body whole, as io.ReadAll does, with what came
// before an error. A body of known length is read into one buffer of that
// length: io.ReadAll's growing copies cost little alone, but under the
// race detector every copy is checked byte by byte, and a test moving
// 100 MiB spent 14 s of its 15 there.
func ReadBody(resp *http.Response) ([]byte, error) {
	if resp.Body == http.NoBody || resp.ContentLength < 0 || resp.ContentLength > 64<<20 {
		return io.ReadAll(resp.Body)
	}
	body := make([]byte, resp.ContentLength)
	n, err := io.ReadFull(resp.Body, body)
	if err != nil {
		return body[:n], err
	}
	// what follows (nothing, or net/http's error for a short body) is io.ReadAll's to say
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) > 0 {
		return append(body, rest...), err
	}
	return body, nil
}

// Do sends "method target HTTP/1.1" with Host and the extra header lines
// in fields (each ending in CRLF, or ""), and reads the response.
func (c *Client) Do(method, target, fields string) (*http.Response, []byte) {
	c.t.Helper()
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: t\r\n%s\r\n", method, target, fields)
	return c.ReadResponse(method)
}

// Get is Do for a GET with no extra fields.
func (c *Client) Get(target string) (*http.Response, []byte) {
	c.t.Helper()
	return c.Do("GET", target, "")
}

// ReadRaw reads one response as it came (see Raw), for tests that assert
// exact bytes.
func (c *Client) ReadRaw(method string) *Raw {
	c.t.Helper()
	r, err := ReadRaw(c.R, method)
	require.NoError(c.t, err)
	return r
}

// Closed reports whether the server closed the connection (end of file or
// reset) within two seconds, without a byte more. It sets the read
// deadline.
func (c *Client) Closed() bool {
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.R.ReadByte()
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}
