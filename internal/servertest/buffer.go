package servertest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that a test may read while another goroutine
// writes into it: a server's access log, or what os/exec copies of a
// process's output.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
