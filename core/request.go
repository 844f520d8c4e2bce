package core

// Method is the request method, reduced to what a static-file server
// distinguishes. MethodOther keeps the raw name in Request.MethodName.
type Method uint8

const (
	MethodOther Method = iota
	MethodGet
	MethodHead
	MethodOptions
	MethodPost
	MethodConnect // its target is authority-form; Path is empty
)

// Request is one parsed request head. Every byte slice aliases the buffer
// given to Parse and is valid only until that buffer is reused: the Conn
// finishes with a Request before it consumes more input.
type Request struct {
	Method     Method
	MethodName []byte // as sent, e.g. "GET"
	Target     []byte // request-target as sent (origin-, absolute- or asterisk-form)
	Path       []byte // path part of the target, still percent-encoded, always starts with '/' (or is "*"; empty for CONNECT)
	Query      []byte // after '?', without it; nil if none
	Major      int    // HTTP major version (always 1 after a successful parse)
	Minor      int    // HTTP minor version (0 or 1; 1.x with x > 1 is treated as 1.1)

	Host          []byte // Host header, or the authority of an absolute-form target (which wins)
	Close         bool   // the client asked for, or its version implies, closing after this response
	ContentLength int64  // -1 when absent
	Chunked       bool   // Transfer-Encoding ends in chunked
	Expect100     bool   // Expect: 100-continue
	ContentType   []byte // Content-Type, for CGI's CONTENT_TYPE

	IfMatch           []byte
	IfUnmodifiedSince []byte
	IfNoneMatch       []byte
	IfModifiedSince   []byte
	Range             []byte
	IfRange           []byte
	AcceptEncoding    []byte
	HasAcceptEncoding bool // an Accept-Encoding field was sent, even empty
	UserAgent         []byte
	Referer           []byte

	NumHeaders int
}

// Reset clears r for reuse without freeing anything.
func (r *Request) Reset() { *r = Request{ContentLength: -1} }
