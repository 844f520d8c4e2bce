package core

// outSlab lends Conns the out buffer their responses' headers are built
// in, outStart bytes from memory mapped outside the Go heap, and takes it
// back once the Conn has sent all it queued: the buffer is held while a
// response is under way, not while its connection waits for the next
// request, as nginx frees an idle keep-alive connection's buffers. At
// 10,000 keep-alive connections, most of them idle at any moment, their
// own outs were 2.5 MB of the heap; the slab holds as many as are in use
// at once (results/2026-12-02_b966187_c10k-rss). Being mapped, a lent buffer
// needs no pin while the kernel reads it (Out.Mapped).
//
// A response that outgrows its buffer is moved to the heap by append, and
// the Conn keeps that buffer as it always did: a small page's header and
// body, copied together, take a heap buffer once per Conn and no slab
// slot after. The slab never shrinks: its chunks are unmapped when the
// loop closes, if none is lent.
type outSlab struct {
	chunks [][]byte // outSlabChunk bytes each, mapped
	free   []int32  // the free slots; the last one freed is lent first
	lent   int
}

// outSlabChunk is the memory one mmap adds: outSlabChunk/outStart slots.
const outSlabChunk = 64 << 10

const slotsPerChunk = outSlabChunk / outStart

// get lends a slot: its buffer (empty, cap outStart) and its index plus
// one, or nil and 0 when no memory can be mapped.
func (s *outSlab) get(sy sys) ([]byte, int32) {
	if len(s.free) == 0 && !s.grow(sy) {
		return nil, 0
	}
	i := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.lent++
	return s.buf(i), i + 1
}

// put takes slot i (an index, not plus one) back.
func (s *outSlab) put(i int32) {
	s.free = append(s.free, i)
	s.lent--
}

// buf is slot i's buffer, empty, with cap outStart.
func (s *outSlab) buf(i int32) []byte {
	c := s.chunks[int(i)/slotsPerChunk]
	off := int(i) % slotsPerChunk * outStart
	return c[off : off : off+outStart]
}

// holds reports whether out's array is slot i's.
func (s *outSlab) holds(i int32, out []byte) bool {
	return cap(out) > 0 && &out[:1][0] == &s.chunks[int(i)/slotsPerChunk][int(i)%slotsPerChunk*outStart]
}

func (s *outSlab) grow(sy sys) bool {
	b, err := sy.mmap(outSlabChunk)
	if err != nil {
		return false
	}
	base := int32(len(s.chunks) * slotsPerChunk)
	s.chunks = append(s.chunks, b)
	for k := slotsPerChunk - 1; k >= 0; k-- {
		s.free = append(s.free, base+int32(k))
	}
	return true
}

// close unmaps the chunks, unless a buffer is still lent: a send the
// kernel has not finished may read it (the backend's teardown gave up
// waiting), and the process is ending anyway.
func (s *outSlab) close(sy sys) {
	if s.lent > 0 {
		return
	}
	for _, c := range s.chunks {
		sy.munmap(c)
	}
	s.chunks, s.free = nil, nil
}

// lendOut gives c an out buffer from the loop's slab, or from the heap
// when the slab cannot grow. c.out is nil.
func (c *Conn) lendOut() {
	if c.out, c.slab = c.l.outs.get(c.l.sys()); c.out == nil {
		c.out = make([]byte, 0, outStart)
	}
}

// outMapped reports whether out is the slab buffer lent to c (and not a
// heap buffer append moved it to).
func (c *Conn) outMapped() bool {
	return c.slab != 0 && c.l.outs.holds(c.slab-1, c.out)
}

// putAway runs once all c queued is sent (Sent) and returns what a
// response's send needed to the loop: the slab slot (when append moved
// out to the heap the slot was left behind: it goes back, and c keeps the
// heap buffer), and the segs and vec arrays of a referenced body, which
// the loop lends to the next response that needs them (takeSegs,
// takeVec): 128 bytes per connection that an idle one no longer holds.
func (c *Conn) putAway() {
	if len(c.out) > 0 {
		return
	}
	l := c.l
	if c.slab != 0 {
		if c.outMapped() {
			c.out = nil
		}
		l.outs.put(c.slab - 1)
		c.slab = 0
	}
	if c.segs != nil && cap(c.segs) <= maxSegs {
		l.spareSegs = append(l.spareSegs, c.segs[:0])
		c.segs = nil
	}
	if c.vec != nil && cap(c.vec) <= 2*maxSegs+1 {
		clear(c.vec[:cap(c.vec)]) // no pointers to bodies that may be unmapped
		l.spareVecs = append(l.spareVecs, c.vec[:0])
		c.vec = nil
	}
}

// takeSegs is a segs array put away by an idle Conn, or nil.
func (l *Loop) takeSegs() []seg { return popSpare(&l.spareSegs) }

// takeVec is a vec array put away by an idle Conn, or nil.
func (l *Loop) takeVec() [][]byte { return popSpare(&l.spareVecs) }

// popSpare takes the last of spares, or nil, and clears its place, which
// would otherwise keep it reachable.
func popSpare[T any](spares *[][]T) []T {
	n := len(*spares)
	if n == 0 {
		return nil
	}
	s := (*spares)[n-1]
	(*spares)[n-1] = nil
	*spares = (*spares)[:n-1]
	return s
}
