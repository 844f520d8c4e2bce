package core

import "time"

// dateCache holds the Date header line, re-rendered only when the second
// changes: formatting a time is paid once per second per loop instead of
// once per response (fasthttp and nginx do the same).
type dateCache struct {
	sec  int64
	line []byte // "Date: Mon, 02 Jan 2006 15:04:05 GMT\r\n"
}

// set moves the cache to now; it reports whether the second changed.
func (d *dateCache) set(now time.Time) bool {
	sec := now.Unix()
	if sec == d.sec && d.line != nil {
		return false
	}
	d.sec = sec
	d.line = append(d.line[:0], "Date: "...)
	d.line = now.UTC().AppendFormat(d.line, httpTimeFormat)
	d.line = append(d.line, "\r\n"...)
	return true
}

// httpTimeFormat is IMF-fixdate (RFC 9110 §5.6.7).
const httpTimeFormat = "Mon, 02 Jan 2006 15:04:05 GMT"

// parseHTTPTime accepts the three formats RFC 9110 §5.6.7 obliges a
// recipient to read.
func parseHTTPTime(b []byte) (time.Time, bool) {
	s := string(b)
	for _, layout := range [...]string{httpTimeFormat, time.RFC850, time.ANSIC} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
