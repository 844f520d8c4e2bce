package core

import (
	"bytes"
	"io"
	"net/http/httputil"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var chunkedCases = []struct {
	name string
	in   string
	body string // decoded, when ok
	n    int    // bytes consumed, when ok: the rest is the next request
	err  error
}{
	{name: "empty body", in: "0\r\n\r\n", n: 5},
	{name: "two chunks", in: "5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n", body: "hello, world", n: 27},
	{name: "hex both cases, leading zeros", in: "0000A\r\n0123456789\r\na\r\n0123456789\r\n00\r\n\r\n", body: "01234567890123456789", n: 40},
	{name: "next request follows", in: "1\r\nx\r\n0\r\n\r\nGET / HTTP/1.1\r\n", body: "x", n: 11},
	{name: "extensions", in: "3;a=b;c=\"d;e\"\r\nabc\r\n0;last\r\n\r\n", body: "abc", n: 30},
	{name: "bws before extension", in: "3 \t;a\r\nabc\r\n0\r\n\r\n", body: "abc", n: 17},
	{name: "trailer fields", in: "1\r\nx\r\n0\r\nX-Sum: 1\r\nY: 2\r\n\r\n", body: "x", n: 27},
	{name: "no digits", in: "\r\n", err: errChunkSize},
	{name: "not hex", in: "g\r\n", err: errChunkSize},
	{name: "0x prefix", in: "0x5\r\nhello\r\n", err: errChunkSize},
	{name: "too many digits", in: "1000000000000000\r\n", err: errChunkSize},
	{name: "negative", in: "-1\r\n", err: errChunkSize},
	{name: "bare lf after size", in: "1\nx\r\n0\r\n\r\n", err: errChunkSize},
	{name: "bare cr after size", in: "1\rx\r\n0\r\n\r\n", err: errChunkLine},
	{name: "whitespace without extension", in: "1 \r\nx\r\n0\r\n\r\n", err: errChunkExt},
	{name: "lf inside extension", in: "1;a\nb\r\nx\r\n", err: errChunkExt},
	{name: "ctl inside extension", in: "1;a\x01\r\nx\r\n", err: errChunkExt},
	{name: "long extension", in: "1;" + strings.Repeat("a", maxChunkLine) + "\r\n", err: errChunkExt},
	{name: "data longer than size", in: "1\r\nxy\r\n", err: errChunkEnd},
	{name: "bare lf after data", in: "1\r\nx\n0\r\n\r\n", err: errChunkEnd},
	{name: "bare lf ends body", in: "0\r\n\n", err: errBadTrailer},
	{name: "cr without lf at the end", in: "0\r\n\rx", err: errChunkLine},
	{name: "bad trailer", in: "0\r\n:x\r\n\r\n", err: errBadTrailer},
	{name: "trailer line without colon", in: "0\r\nGET / HTTP/1.1\r\n\r\n", err: errBadTrailer},
	{name: "trailer name then line end", in: "0\r\nX\r\n\r\n", err: errBadTrailer},
	{name: "space before trailer colon", in: "0\r\nX : 1\r\n\r\n", err: errBadTrailer},
	{name: "bare lf in trailer", in: "0\r\nX: 1\n\r\n", err: errBadTrailer},
	{name: "huge trailer", in: "0\r\n" + strings.Repeat("X: 1\r\n", maxTrailer/6+1), err: errBadTrailer},
}

func TestChunkedDecoder(t *testing.T) {
	for _, tc := range chunkedCases {
		t.Run(tc.name, func(t *testing.T) {
			var d chunkedDecoder
			body, n, err := d.Decode(make([]byte, 0, 1<<20), []byte(tc.in))
			if tc.err != nil {
				require.Equal(t, tc.err, err)
				return
			}
			require.NoError(t, err)
			assert.True(t, d.Done())
			assert.Equal(t, tc.body, string(body))
			assert.Equal(t, tc.n, n)
		})
	}
}

// TestChunkedDecoderSplit feeds every case a byte at a time into a one-byte
// buffer: the decoder must answer as it does for the whole input.
func TestChunkedDecoderSplit(t *testing.T) {
	for _, tc := range chunkedCases {
		t.Run(tc.name, func(t *testing.T) {
			body, n, err := decodeSplit([]byte(tc.in), 1, 1)
			if tc.err != nil {
				require.Equal(t, tc.err, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(body))
			assert.Equal(t, tc.n, n)
		})
	}
}

// decodeSplit decodes in in pieces of step bytes into a buffer of room
// bytes, as the Conn does when a body arrives in many reads and the
// script's stdin takes it in chunks. It stops at the end of the body.
func decodeSplit(in []byte, step, room int) (body []byte, n int, err error) {
	var d chunkedDecoder
	dst := make([]byte, 0, room)
	for n < len(in) && !d.Done() {
		end := min(n+step, len(in))
		var k int
		dst, k, err = d.Decode(dst, in[n:end])
		n += k
		if err != nil {
			return nil, 0, err
		}
		if len(dst) == cap(dst) || d.Done() {
			body = append(body, dst...)
			dst = dst[:0]
		}
		if k == 0 && len(dst) < cap(dst) && !d.Done() {
			break // needs more than in has
		}
	}
	body = append(body, dst...)
	if !d.Done() {
		return body, n, io.ErrUnexpectedEOF
	}
	return body, n, nil
}

func TestChunkedDecoderAllocs(t *testing.T) {
	in := []byte("5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\nT: 1\r\n\r\n")
	dst := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		var d chunkedDecoder
		if _, _, err := d.Decode(dst, in); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

// FuzzChunkedDecoder checks, for any input: no panic; the same answer
// whatever the read and buffer sizes; and agreement with Go's own chunked
// reader on every body this decoder accepts (Go's is laxer: it takes a
// bare LF after chunk-size and whitespace before it; it refuses BWS before
// ';', lines over 4 KiB and a high ratio of framing to data, which RFC
// 9112 allows and so do we).
func FuzzChunkedDecoder(f *testing.F) {
	for _, tc := range chunkedCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		whole, n, err := decodeSplit(in, len(in)+1, 1<<20)
		for _, sz := range [][2]int{{1, 1}, {3, 2}, {7, 64}, {64, 3}} {
			b, n2, err2 := decodeSplit(in, sz[0], sz[1])
			require.Equal(t, err, err2, "split %v", sz)
			if err == nil {
				require.Equal(t, whole, b, "split %v", sz)
				require.Equal(t, n, n2, "split %v", sz)
			}
		}
		if err != nil {
			return
		}
		got, gerr := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(in[:n])))
		if gerr != nil {
			msg := gerr.Error()
			if bytes.Contains(in[:n], []byte(" ;")) || bytes.Contains(in[:n], []byte("\t;")) ||
				strings.Contains(msg, "too long") || strings.Contains(msg, "too much non-data") {
				return // the documented differences
			}
			t.Fatalf("we decode %q from %q; Go refuses it: %v", whole, in[:n], gerr)
		}
		require.Equal(t, string(got), string(whole))
	})
}

// TestChunkedDecoderExcess: the framing a chunk carries beyond 16 bytes
// plus twice its data is counted, exactly, and never paid back by a later
// chunk; split anywhere, the count is the same.
func TestChunkedDecoderExcess(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     string
		excess int64
	}{
		{name: "plain", in: "5\r\nhello\r\n0\r\n\r\n"},
		{name: "one-byte chunks", in: strings.Repeat("1\r\nx\r\n", 50) + "0\r\n\r\n"},
		// "1;", 12 bytes of extension, CRLF, then x CRLF: 18, the allowance.
		{name: "at the allowance", in: "1;" + strings.Repeat("a", 12) + "\r\nx\r\n0\r\n\r\n"},
		{name: "one over", in: "1;" + strings.Repeat("a", 13) + "\r\nx\r\n0\r\n\r\n", excess: 1},
		// A size line's digits are framing too, with no extension: 14
		// digits, CRLF, then x CRLF is 18; 15 digits is one over.
		{name: "long size line at the allowance", in: "00000000000001\r\nx\r\n0\r\n\r\n"},
		{name: "long size line one over", in: "000000000000001\r\nx\r\n0\r\n\r\n", excess: 1},
		// Not paid back by the large chunk after it.
		{name: "then a large chunk", in: "1;" + strings.Repeat("a", 13) + "\r\nx\r\n400\r\n" + strings.Repeat("y", 1024) + "\r\n0\r\n\r\n", excess: 1},
		// The last chunk's line: "0;" 20 bytes CRLF is 24, 8 over.
		{name: "last chunk", in: "0;" + strings.Repeat("a", 20) + "\r\n\r\n", excess: 8},
		{name: "4 KiB line", in: "1;" + strings.Repeat("a", 4000) + "\r\nx\r\n0\r\n\r\n", excess: 4006 - 18},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d chunkedDecoder
			_, n, err := d.Decode(make([]byte, 0, 4096), []byte(tc.in))
			require.NoError(t, err)
			require.True(t, d.Done())
			assert.Equal(t, len(tc.in), n)
			assert.Equal(t, tc.excess, d.excess)
			for step := 1; step < 8; step++ {
				var d chunkedDecoder
				for in := []byte(tc.in); len(in) > 0; {
					_, n, err := d.Decode(make([]byte, 0, 4096), in[:min(step, len(in))])
					require.NoError(t, err)
					in = in[n:]
				}
				assert.Equal(t, tc.excess, d.excess, "step %d", step)
			}
		})
	}
}
