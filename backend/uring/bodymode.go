package uring

// BodyMode is how a response's file body goes from the file to the socket
// (--uring-body). The default is the one path a reader follows (body.go);
// each other value is an ablation kept to measure what the default buys,
// and is chosen in one place (bodies.init), its code in files of its own.
type BodyMode uint8

const (
	// BodySendfile (the default): the parts that are in the page cache go
	// by sendfile(2) on the loop's thread, cold parts by READ into a chunk
	// and SEND (chunk_linux.go); within the server's cold window
	// (core.Server.Cold) resident parts splice instead (splice_linux.go).
	BodySendfile BodyMode = iota
	// BodySplice: every part file → pipe → socket by IORING_OP_SPLICE on
	// io_uring's workers (--uring-body=splice), cold parts as the default.
	BodySplice
	// BodyRead: every part by READ into a chunk and SEND (--uring-body=read).
	BodyRead
	// BodyView: resident parts by SEND from the File's shared read-only
	// mapping, cold parts as the default (--uring-body=view).
	BodyView
	// BodyViewZC is BodyView with IORING_OP_SEND_ZC (--uring-body=view-zc).
	BodyViewZC
)

// BodyModes are the --uring-body values, by name.
var BodyModes = map[string]BodyMode{
	"sendfile": BodySendfile,
	"splice":   BodySplice,
	"read":     BodyRead,
	"view":     BodyView,
	"view-zc":  BodyViewZC,
}
