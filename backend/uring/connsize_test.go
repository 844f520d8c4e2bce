package uring

import (
	"testing"
	"unsafe"
)

// TestConnSize: a conn stays in the 208-byte size class, one below the
// 224 it took before its fields were packed: every connection's slot
// pays for it (results/2026-12-02_b966187_c10k-rss). A field that pushes
// it over must be packed in, or this figure raised with a reason.
func TestConnSize(t *testing.T) {
	if n := unsafe.Sizeof(conn{}); n > 208 {
		t.Errorf("conn is %d bytes, over the 208-byte size class", n)
	}
}
