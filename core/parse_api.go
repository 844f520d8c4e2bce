package core

import "errors"

// ErrNeedMore is returned by ParseRequest when the bytes so far are a valid
// prefix of a request head. It is not an error in the input.
var ErrNeedMore = errors.New("need more bytes")

// ProtocolError is a malformed or refused request head. Status is the HTTP
// status to answer with before closing the connection.
type ProtocolError struct {
	Status int    // 400, 414, 431, 501 or 505
	Reason string // short, for the access log and tests
}

func (e *ProtocolError) Error() string { return e.Reason }

// Limits bounds what ParseRequest accepts. Zero fields take the defaults.
type Limits struct {
	MaxRequestLine int // longest request line (414 beyond it); default 8 KiB as nginx
	MaxHeaderBytes int // longest head, request line included (431 beyond it); default 32 KiB
	MaxHeaders     int // most header fields (431 beyond it); default 100
}
