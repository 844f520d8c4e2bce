package epoll

import (
	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// The counters only epoll keeps, by their index into core.Stats.Own:
// ownReadaheads counts the file ranges that were not resident before a
// sendfile chunk and that a helper read ahead (loops.Bodies);
// ownReadaheadsInline, those sent inline instead, blocking on the disk,
// because the helpers' queue was full.
const (
	ownReadaheads       = loops.OwnReadaheads
	ownReadaheadsInline = loops.OwnReadaheadsInline
)

// counters says what each is. Operators scrape these names and scripts
// read these keys (scripts/cold-readahead.sh): they stay as they are.
var counters = [...]core.Counter{
	ownReadaheads: {Key: "readaheads", Metric: "epoll_readaheads_total",
		Help: "File ranges not in the page cache that a helper read before their sendfile (epoll backend), so that the loop did not wait for the disk."},
	ownReadaheadsInline: {Key: "readaheads_inline", Metric: "epoll_readaheads_inline_total",
		Help: "File ranges not in the page cache sent inline, the loop waiting for the disk, because the helpers' queue was full."},
}

// Counters describes the read-ahead counters (core.Backend).
func (*Backend) Counters() []core.Counter { return counters[:] }
