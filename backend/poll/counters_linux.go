package poll

import (
	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/core"
)

// counters are the read-ahead counters of loops.Bodies, which poll shares
// with epoll, under poll's own metric names; the summary line's keys are
// epoll's (one server runs one backend).
var counters = [...]core.Counter{
	loops.OwnReadaheads: {Key: "readaheads", Metric: "poll_readaheads_total",
		Help: "File ranges not in the page cache that a helper read before their sendfile (poll backend), so that the loop did not wait for the disk."},
	loops.OwnReadaheadsInline: {Key: "readaheads_inline", Metric: "poll_readaheads_inline_total",
		Help: "File ranges not in the page cache sent inline, the loop waiting for the disk, because the helpers' queue was full (poll backend)."},
}

// Counters describes the read-ahead counters (core.Backend).
func (*Backend) Counters() []core.Counter { return counters[:] }
