package core

import (
	"net/http"
	"strconv"
)

// statusLines holds, for every status the core sends, the status line and
// the Server field, and a small HTML body for errors, all built once.
type statusLines struct {
	line   [600][]byte // "HTTP/1.1 404 Not Found\r\nServer: twinloop\r\n"
	page   [600][]byte // error page body, nginx style
	server string
}

var sentStatuses = []int{200, 204, 206, 301, 304, 400, 403, 404, 405, 408, 411, 412, 413, 414, 416, 431, 500, 501, 502, 503, 504, 505}

func newStatusLines(server string) *statusLines {
	s := &statusLines{server: server}
	for _, code := range sentStatuses {
		text := http.StatusText(code)
		line := "HTTP/1.1 " + strconv.Itoa(code) + " " + text + "\r\n"
		if server != "" {
			line += "Server: " + server + "\r\n"
		}
		s.line[code] = []byte(line)
		if code >= 300 && code != 304 {
			title := strconv.Itoa(code) + " " + text
			foot := ""
			if server != "" {
				foot = "<hr><center>" + server + "</center>\r\n"
			}
			s.page[code] = []byte("<html>\r\n<head><title>" + title + "</title></head>\r\n<body>\r\n<center><h1>" +
				title + "</h1></center>\r\n" + foot + "</body>\r\n</html>\r\n")
		}
	}
	return s
}

// appendLine appends the status line and Server field for any status a
// CGI script may give, with its own reason phrase if it has one.
func (s *statusLines) appendLine(b []byte, code int, reason []byte) []byte {
	if len(reason) == 0 && s.line[code] != nil {
		return append(b, s.line[code]...)
	}
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	switch {
	case len(reason) > 0:
		b = append(b, reason...)
	case http.StatusText(code) != "":
		b = append(b, http.StatusText(code)...)
	default:
		b = append(b, "Unknown"...)
	}
	b = append(b, "\r\n"...)
	if s.server != "" {
		b = append(append(append(b, "Server: "...), s.server...), "\r\n"...)
	}
	return b
}

// parseDigits parses a non-empty run of decimal digits without overflow.
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
