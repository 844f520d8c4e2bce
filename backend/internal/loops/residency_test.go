package loops

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/core"
)

// A file just written is in the page cache, every page of it: Range knows,
// counts with the kernel's page size, and makes one counted call.
func TestResidencyRange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, make([]byte, 3*pageSize+100), 0o644))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var st core.Stats
	r := NewResidency(NewSys(&st))
	cached, known := r.Range(int(f.Fd()), pageSize/2, 3*pageSize)
	if !known && r.Missing() {
		t.Skip("cachestat(2) is missing here (Linux 6.5)")
	}
	require.True(t, known)
	assert.True(t, cached, "a file just written is cached")
	assert.Equal(t, uint64(1), st.Syscalls[core.SysCachestat])

	// Past the file's end no page is cached: the range is not.
	cached, known = r.Range(int(f.Fd()), 8*pageSize, pageSize)
	assert.True(t, known)
	assert.False(t, cached)
}

// Where cachestat is refused, Range says it cannot tell and stops asking.
func TestResidencyMissing(t *testing.T) {
	var st core.Stats
	r := NewResidency(NewSys(&st))
	r.missing = true
	cached, known := r.Range(0, 0, pageSize)
	assert.False(t, cached)
	assert.False(t, known)
	assert.Zero(t, st.Syscalls[core.SysCachestat])
}
