package servertest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
)

// Raw is one response as it came off the wire, for tests that assert what
// net/http's parser does not keep: the exact status line, the fields in
// the order sent, that every line ends in CRLF.
type Raw struct {
	Status  string      // the status line, without its CRLF: "HTTP/1.1 200 OK"
	Code    int         // the status code
	Fields  []string    // the header fields as sent, in order, each without its CRLF
	Header  http.Header // the same fields by canonical name
	Body    []byte      // the body, with the chunked coding undone
	Trailer []string    // the trailer fields of a chunked body, as sent
}

// ReadRaw reads one response to a request with method from r. Every line
// of the head must end in CRLF. The body is framed as RFC 9112 §6.3 says:
// none after HEAD or with a 1xx, 204 or 304; chunked when the last
// transfer coding is; else as long as a single Content-Length says; else
// up to the close. Chunks are read by net/http's chunked reader.
func ReadRaw(r *bufio.Reader, method string) (*Raw, error) {
	status, err := readLine(r)
	if err != nil {
		return nil, fmt.Errorf("status line: %w", err)
	}
	proto, rest, _ := strings.Cut(status, " ")
	code, _, _ := strings.Cut(rest, " ")
	n, err := strconv.Atoi(code)
	if !strings.HasPrefix(proto, "HTTP/1.") || len(code) != 3 || err != nil {
		return nil, fmt.Errorf("not a status line: %q", status)
	}
	raw := &Raw{Status: status, Code: n, Header: http.Header{}}
	if raw.Fields, err = readFields(r, raw.Header); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	te := raw.Header.Values("Transfer-Encoding")
	cl := raw.Header.Values("Content-Length")
	switch {
	case method == "HEAD" || n/100 == 1 || n == 204 || n == 304:
	case len(te) > 0:
		codings := strings.Split(strings.Join(te, ","), ",")
		if !strings.EqualFold(strings.TrimSpace(codings[len(codings)-1]), "chunked") {
			raw.Body, err = io.ReadAll(r)
			break
		}
		if raw.Body, err = io.ReadAll(httputil.NewChunkedReader(r)); err != nil {
			return raw, fmt.Errorf("chunked body: %w", err)
		}
		if raw.Trailer, err = readFields(r, http.Header{}); err != nil {
			return raw, fmt.Errorf("trailer: %w", err)
		}
	case len(cl) > 1:
		return raw, fmt.Errorf("%d Content-Length fields: %q", len(cl), cl)
	case len(cl) == 1:
		size, perr := strconv.ParseUint(cl[0], 10, 31)
		if perr != nil {
			return raw, fmt.Errorf("Content-Length: %w", perr)
		}
		raw.Body = make([]byte, size)
		var got int
		got, err = io.ReadFull(r, raw.Body)
		raw.Body = raw.Body[:got]
	default:
		raw.Body, err = io.ReadAll(r)
	}
	if err != nil {
		return raw, fmt.Errorf("body: %w", err)
	}
	return raw, nil
}

// readFields reads field lines up to the empty line that ends them, into
// h by canonical name, and returns them as sent.
func readFields(r *bufio.Reader, h http.Header) ([]string, error) {
	var fields []string
	for {
		line, err := readLine(r)
		if err != nil {
			return fields, err
		}
		if line == "" {
			return fields, nil
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return fields, fmt.Errorf("not a field line: %q", line)
		}
		fields = append(fields, line)
		h.Add(name, strings.Trim(value, " \t"))
	}
}

// readLine reads one line, which must end in CRLF, and returns it without.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return "", fmt.Errorf("%w after %q", err, line)
	}
	if !strings.HasSuffix(line, "\r\n") {
		return "", fmt.Errorf("line ends in a bare LF: %q", line)
	}
	return line[:len(line)-2], nil
}
