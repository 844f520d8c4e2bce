package loops

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/twinloop/twinloop/core"
)

func TestLifecycleStop(t *testing.T) {
	srv, err := core.NewServer(core.Config{Dir: t.TempDir(), ShutdownTimeout: time.Minute})
	require.NoError(t, err)
	defer srv.Close()
	c := srv.NewLoop(0)
	defer c.Close()

	var lc Lifecycle
	fd, err := lc.Waker.Open(unix.EFD_NONBLOCK)
	require.NoError(t, err)
	defer lc.Waker.Close()

	assert.False(t, lc.BeginStop(c, time.Minute), "no shutdown before Stop")
	assert.False(t, lc.Stopping())
	assert.True(t, lc.Accepting())

	lc.Stop()
	var b [8]byte
	_, err = unix.Read(fd, b[:])
	require.NoError(t, err, "Stop wakes the loop")
	assert.False(t, lc.Stopping(), "the loop starts the shutdown, not Stop")

	before := time.Now()
	require.True(t, lc.BeginStop(c, time.Minute))
	assert.True(t, lc.Stopping())
	assert.False(t, lc.Accepting())
	assert.WithinDuration(t, before.Add(time.Minute), lc.Deadline(), time.Second)
	assert.WithinDuration(t, before.Add(time.Minute+core.ShutdownGrace), srv.ExitDeadline(), time.Second,
		"the core was drained: the server's exit deadline follows the loop's")

	deadline := lc.Deadline()
	lc.Stop()
	assert.False(t, lc.BeginStop(c, time.Hour), "started once")
	assert.Equal(t, deadline, lc.Deadline())
}

func TestLifecycleStopNow(t *testing.T) {
	var lc Lifecycle
	lc.StopNow()
	assert.True(t, lc.Stopping())
	assert.False(t, lc.Accepting())
	assert.True(t, lc.Deadline().IsZero(), "no deadline: Teardown ends every request itself")
}

func TestLifecyclePause(t *testing.T) {
	var lc Lifecycle
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	assert.False(t, lc.Resume(now), "nothing to resume")

	assert.True(t, lc.Pause(now), "the first failure of a spell")
	assert.False(t, lc.Accepting())
	assert.False(t, lc.Pause(now.Add(100*time.Millisecond)), "paused already: not logged again")

	// The second failure moved the end of the pause.
	assert.False(t, lc.Resume(now.Add(PauseFor)))
	assert.False(t, lc.Accepting())
	assert.True(t, lc.Resume(now.Add(100*time.Millisecond+PauseFor)))
	assert.True(t, lc.Accepting())
	assert.False(t, lc.Resume(now.Add(time.Hour)), "resumed once")

	assert.True(t, lc.Pause(now.Add(time.Hour)), "a new spell")
}

func TestLifecycleTimeout(t *testing.T) {
	at := func(ms int) time.Time { return time.Date(2026, 1, 2, 3, 4, 5, ms*int(time.Millisecond), time.UTC) }
	for _, tc := range []struct {
		name   string
		now    time.Time
		paused time.Time // zero: not paused
		want   time.Duration
	}{
		{name: "until the next second", now: at(300), want: 700 * time.Millisecond},
		{name: "on the second: a whole one", now: at(0), want: time.Second},
		{name: "the pause ends first", now: at(300), paused: at(400), want: 100 * time.Millisecond},
		{name: "the second comes first", now: at(900), paused: at(1400), want: 100 * time.Millisecond},
		{name: "the pause is over", now: at(300), paused: at(200), want: -100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lc Lifecycle
			if !tc.paused.IsZero() {
				lc.Pause(tc.paused.Add(-PauseFor))
			}
			assert.Equal(t, tc.want, lc.Timeout(tc.now))
		})
	}
}
