package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A proxy cell sums the instances' accepts and requests from their exit
// lines; a log without one gives nothing.
func TestExitFields(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "s.log")
	os.WriteFile(log, []byte("127.0.0.1 - GET / 200\nserver: stopped; requests=5000 2xx=5000 accepts=12 closes=12 syscalls=10400 syscalls_per_req=2.08 accept4=12 buf_bytes=0\n"), 0o644)
	m := exitFields(log)
	assert.Equal(t, int64(5000), m["requests"])
	assert.Equal(t, int64(12), m["accepts"])
	assert.Equal(t, int64(10400), m["syscalls"])
	assert.NotContains(t, m, "syscalls_per_req", "not an integer")
	assert.Empty(t, exitFields(filepath.Join(dir, "none.log")))
}

func TestNextPortRange(t *testing.T) {
	r := &runner{ports: [2]int{21790, 21799}}
	p, err := r.nextPort()
	if err != nil {
		t.Skip("no free port in 21790-21799 on this machine")
	}
	assert.GreaterOrEqual(t, p, 21790)
	assert.LessOrEqual(t, p, 21799)
}
