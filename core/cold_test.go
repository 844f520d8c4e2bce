package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestColdWindow(t *testing.T) {
	var w ColdWindow
	t0 := time.Unix(1_700_000_000, 0)
	assert.False(t, w.Recent(t0), "a window never opened")
	w.Note(t0)
	assert.True(t, w.Recent(t0))
	assert.True(t, w.Recent(t0.Add(ColdWindowLen-time.Millisecond)))
	assert.False(t, w.Recent(t0.Add(ColdWindowLen)), "closed once ColdWindowLen has passed")

	// A cold part met within ColdWindowLen/16 of the last one stores
	// nothing: the window runs from the first.
	w.Note(t0.Add(ColdWindowLen / 32))
	assert.False(t, w.Recent(t0.Add(ColdWindowLen)))
	// One met later opens it again from then.
	w.Note(t0.Add(ColdWindowLen / 2))
	assert.True(t, w.Recent(t0.Add(ColdWindowLen)))
	assert.False(t, w.Recent(t0.Add(ColdWindowLen/2+ColdWindowLen)))
}

// Each Server has its own window: a cold part met by one server (or one
// test) does not change how another sends its bodies.
func TestColdWindowPerServer(t *testing.T) {
	var a, b Server
	now := time.Now()
	a.Cold.Note(now)
	assert.True(t, a.Cold.Recent(now))
	assert.False(t, b.Cold.Recent(now))
}

func TestColdWindowReset(t *testing.T) {
	var w ColdWindow
	now := time.Now()
	w.Note(now)
	w.Reset()
	assert.False(t, w.Recent(now))
}
