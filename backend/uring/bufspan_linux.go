package uring

import "github.com/twinloop/twinloop/core"

// By default a recv's CQE names one provided buffer, which holds all of
// its bytes and goes back to the ring once they are fed (onRecv). Two
// features change that, and this file is where the loop follows them:
//
//   - --uring-recv-bundle (IORING_RECVSEND_BUNDLE, Linux 6.10): a recv
//     takes as many buffers as its data fills, and its one CQE names the
//     first; the others are the ones that followed it in the ring, in the
//     order they were added (io_uring_prep_recv(3), "bundle"). The loop
//     recycles buffers in any order, so it keeps which buffer went in at
//     which ring position (at, pos).
//   - --uring-buf-inc (IOU_PBUF_RING_INC, Linux 6.12): the kernel takes a
//     buffer a recv at a time, from where the previous recv left it, and
//     keeps it in the ring while room is left (IORING_CQE_F_BUF_MORE); a
//     buffer's bytes may belong to several connections, in the order of
//     their CQEs. The loop keeps how far each buffer is filled (off); a
//     buffer goes back once the kernel has moved past it.
//
// Together: the first buffer is taken from its offset, the others whole,
// the last kept while the CQE says IORING_CQE_F_BUF_MORE.

// cqeFBufMore is IORING_CQE_F_BUF_MORE; pbufRingInc is IOU_PBUF_RING_INC,
// a flag of struct io_uring_buf_reg; recvSendBundle is
// IORING_RECVSEND_BUNDLE, in a recv SQE's ioprio.
const (
	cqeFBufMore    = 1 << 4
	pbufRingInc    = 2
	recvSendBundle = 1 << 4
)

// bufSpans tracks the buffers for bundles and incremental consumption.
type bufSpans struct {
	ring  *bufRing
	inc   bool
	off   []int32  // inc: bytes of each buffer the kernel has filled
	pos   []uint16 // the ring position each buffer was last added at
	at    []uint16 // the buffer added at each ring position (by position & mask)
	tail  uint16   // ring positions added so far, modulo 2^16 as the ring's tail
	mask  uint16
	parts [][]byte // fill's: the CQE's bytes, buffer by buffer
	done  []uint16 // fill's: the buffers the kernel is done with
}

// newBufSpans tracks b's buffers, each added to the ring in the order of
// its id (newBufRing).
func newBufSpans(b *bufRing, inc bool) *bufSpans {
	s := &bufSpans{
		ring: b, inc: inc, off: make([]int32, b.count), pos: make([]uint16, b.count), at: make([]uint16, b.count),
		mask: uint16(b.count - 1),
	}
	for i := range b.count {
		s.added(uint16(i))
	}
	return s
}

// added records that buffer id goes in at the ring's next position,
// empty.
func (s *bufSpans) added(id uint16) {
	s.off[id] = 0
	s.pos[id] = s.tail
	s.at[s.tail&s.mask] = id
	s.tail++
}

// fill lays a CQE's res bytes over its buffers, from buffer id, into
// s.parts, and lists in s.done the buffers the kernel is done with. A
// buffer a CQE names stays the loop's, unread by the kernel, until the
// loop recycles it: no later recv can reuse its ring position before.
func (s *bufSpans) fill(id uint16, res int32, flags uint32) {
	b := s.ring
	s.parts, s.done = s.parts[:0], s.done[:0]
	left := int(max(res, 0))
	for p := s.pos[id]; ; p++ {
		bid := s.at[p&s.mask]
		start := int(s.off[bid])
		n := min(left, b.size-start)
		if n > 0 {
			s.parts = append(s.parts, b.buf(bid)[start:start+n])
		}
		left -= n
		last := left == 0
		if s.inc {
			s.off[bid] += int32(n)
			if last && flags&cqeFBufMore != 0 {
				return // the kernel fills the rest of it later
			}
		}
		s.done = append(s.done, bid)
		if last {
			return
		}
	}
}

// feed: each buffer's part is fed in turn, then the buffers the kernel is
// done with go back to the ring.
func (s *bufSpans) feed(c *core.Conn, closing bool, id uint16, res int32, flags uint32) {
	s.fill(id, res, flags)
	if !closing {
		for _, p := range s.parts {
			c.Feed(p) // Feed copies what it keeps
		}
	}
	s.recycleDone()
}

// recycleDone recycles what fill found done.
func (s *bufSpans) recycleDone() {
	for _, d := range s.done {
		s.added(d)
		s.ring.recycle(d)
	}
}

func (s *bufSpans) drop(id uint16, res int32, flags uint32) {
	s.fill(id, res, flags)
	s.recycleDone()
}
