package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProfile(t *testing.T) {
	prof := `mode: atomic
github.com/twinloop/twinloop/backend/epoll/loop_linux.go:40.31,40.49 1 5
github.com/twinloop/twinloop/backend/epoll/loop_linux.go:43.31,45.16 2 0
github.com/twinloop/twinloop/core/conn.go:10.2,11.3 1 7
`
	got, err := parseProfile(strings.NewReader(prof))
	require.NoError(t, err)
	assert.Equal(t, map[block]int64{
		{file: "backend/epoll/loop_linux.go", line: 40, col: 31}: 5,
		{file: "backend/epoll/loop_linux.go", line: 43, col: 31}: 0,
	}, got)
	_, err = parseProfile(strings.NewReader("mode: atomic\nnot a line\n"))
	assert.Error(t, err)
}

// Blocks are placed in methods by their receiver's type, whatever its
// pointer or type parameters, and a closure in a variable's value in the
// variable.
func TestMeasure(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "backend/epoll"), 0o755))
	src := `package epoll

type loop struct{}

func (l *loop) Run() {
	for {
	}
}

type ring[T any] struct{}

func (r ring[T]) push() {}

var pool = struct{ New func() int }{New: func() int {
	return 1
}}

func helper() {}
`
	require.NoError(t, os.WriteFile(filepath.Join(root, "backend/epoll/loop_linux.go"), []byte(src), 0o644))
	b := func(line, col int) block { return block{file: "backend/epoll/loop_linux.go", line: line, col: col} }
	once := map[block]int64{b(5, 22): 1, b(6, 6): 100, b(12, 25): 3, b(14, 51): 0, b(18, 15): 1}
	twice := map[block]int64{b(5, 22): 1, b(6, 6): 200, b(12, 25): 5, b(14, 51): 10, b(18, 15): 1}
	p, err := measure(newFuncs(root), once, twice, 10)
	require.NoError(t, err)
	assert.Equal(t, []fn{{file: "epoll/loop_linux.go", name: "loop.Run", pos: 5}, {file: "epoll/loop_linux.go", name: "pool", pos: 14}}, p.fns)
	assert.Equal(t, map[fn]int64{{file: "epoll/loop_linux.go", name: "ring.push", pos: 12}: 2}, p.rare)

	_, err = measure(newFuncs(root), nil, map[block]int64{b(3, 1): 1}, 10)
	assert.ErrorContains(t, err, "a block in no function")
}
