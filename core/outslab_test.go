package core

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Conn holds a slab buffer while its response is under way, and gives
// it back once all is sent; a second Conn meanwhile gets another.
func TestOutLentWhileAResponseIsUnderWay(t *testing.T) {
	l, _ := memLoop(t, Config{MemBodyMax: 64 << 10})
	a, b := l.NewConn(netipNone), l.NewConn(netipNone)
	a.Feed([]byte("GET /64k.bin HTTP/1.1\r\nHost: a\r\n\r\n"))
	b.Feed([]byte("GET /64k.bin HTTP/1.1\r\nHost: a\r\n\r\n"))
	oa, ob := a.Out(), b.Out()
	assert.True(t, oa.Mapped, "the header is in a slab buffer")
	assert.True(t, ob.Mapped)
	assert.NotSame(t, &oa.Mem[0], &ob.Mem[0])
	assert.Equal(t, 2, l.outs.lent)

	drain(a)
	assert.Nil(t, a.out, "an idle connection holds no out")
	assert.Zero(t, a.slab)
	assert.Nil(t, a.segs, "nor segs")
	assert.Nil(t, a.vec, "nor vec")
	assert.Len(t, l.spareSegs, 1)
	assert.Len(t, l.spareVecs, 1)
	assert.Equal(t, 1, l.outs.lent)
	assert.True(t, b.Out().Mapped, "b's buffer is b's still")

	// The next request takes the slot, segs and vec a put away.
	a.Feed([]byte("GET /64k.bin HTTP/1.1\r\nHost: a\r\n\r\n"))
	assert.Same(t, &oa.Mem[0], &a.Out().Mem[0])
	assert.Empty(t, l.spareSegs)
	assert.Empty(t, l.spareVecs)

	// A connection freed with its response queued gives its slot back.
	b.Sent(10)
	l.FreeConn(b)
	assert.Equal(t, 1, l.outs.lent)
	drain(a)
	assert.Zero(t, l.outs.lent)
}

// A response that outgrows the slab buffer moves to the heap: the slot
// goes back once it is sent, and the Conn keeps the heap buffer for its
// next responses, as it always did.
func TestOutOutgrowsTheSlab(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	c := l.NewConn(netipNone)
	c.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	o := c.Out()
	assert.False(t, o.Mapped, "1.5 KB copied behind the header is on the heap")
	assert.Equal(t, 1, l.outs.lent, "until the response is out")
	drain(c)
	assert.Zero(t, l.outs.lent)
	require.NotNil(t, c.out)
	assert.GreaterOrEqual(t, cap(c.out), 1500)
	heap := &c.out[:1][0]

	c.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	o = c.Out()
	assert.False(t, o.Mapped)
	assert.Same(t, heap, &o.Mem[0], "the heap buffer is reused")
	assert.Zero(t, l.outs.lent)
	drain(c)
}

// The slab grows a chunk at a time, and its slots are distinct.
func TestOutSlabGrows(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	seen := map[*byte]bool{}
	var ids []int32
	for range slotsPerChunk + 1 {
		b, id := l.outs.get(l.sys())
		require.NotNil(t, b)
		assert.Equal(t, outStart, cap(b))
		assert.False(t, seen[&b[:1][0]])
		seen[&b[:1][0]] = true
		ids = append(ids, id)
	}
	assert.Len(t, l.outs.chunks, 2)
	for _, id := range ids {
		l.outs.put(id - 1)
	}
	assert.Zero(t, l.outs.lent)
}
