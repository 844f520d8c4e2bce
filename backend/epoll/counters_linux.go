package epoll

import (
	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// The counters only epoll keeps, by their index into core.Stats.Own:
// ownReadaheads counts the parts of file bodies a helper read into a
// buffer that the loop then sent (loops.Bodies): parts not resident, all
// parts while the server's cold window is open, and those of files that
// are not local; ownReadaheadsInline, the local ones sent inline instead,
// blocking on the disk, because the helpers' queue was full.
const (
	ownReadaheads       = loops.OwnReadaheads
	ownReadaheadsInline = loops.OwnReadaheadsInline
)

// counters says what each is. Operators scrape these names and scripts
// read these keys (scripts/cold-readahead.sh): they stay as they are.
var counters = [...]core.Counter{
	ownReadaheads: {Key: "readaheads", Metric: "epoll_readaheads_total",
		Help: "File body parts a helper read into a buffer for the loop to send (epoll backend): not in the page cache, or while the disk was in play, so that the loop did not wait for the disk."},
	ownReadaheadsInline: {Key: "readaheads_inline", Metric: "epoll_readaheads_inline_total",
		Help: "File body parts sent inline, the loop waiting for the disk, because the helpers' queue was full."},
}

// Counters describes the read-ahead counters (core.Backend).
func (*Backend) Counters() []core.Counter { return counters[:] }
