package core

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A backend's own counters are summed over the loops and shown by their
// keys when they are not zero, as the core's are; one with no key is for
// /metrics only.
func TestStatsOwnCounters(t *testing.T) {
	counters := []Counter{
		{Key: "sqes", Metric: "uring_sqes_total"},
		{Key: "pipes", Metric: "uring_pipes", Gauge: true},
		{Key: "body_cold", Metric: "uring_body_cold_total"},
		{Metric: "uring_enters_total"},
	}
	a := Stats{Requests: 1, OwnCounters: counters}
	a.Own = [NumOwn]int64{3, 1, 0, 5}
	b := Stats{Requests: 2, OwnCounters: counters}
	b.Own = [NumOwn]int64{4, -1, 0, 6}

	var sum Stats
	sum.Add(&a)
	sum.Add(&b)
	assert.Equal(t, uint64(3), sum.Requests)
	assert.Equal(t, [NumOwn]int64{7, 0, 0, 11}, sum.Own)
	assert.Equal(t, counters, sum.OwnCounters)

	line := " " + sum.String() + " "
	assert.Contains(t, line, " sqes=7 ")
	assert.NotContains(t, line, "pipes=", "a gauge back at zero")
	assert.NotContains(t, line, "body_cold=")
	assert.NotContains(t, line, "=11 ", "no key: /metrics only")
	assert.True(t, strings.HasPrefix(line, " requests=3 "))

	assert.NotContains(t, (&Stats{}).String(), "sqes", "a loop whose backend has set no table")
}

// A counter FromSyscall shows the count Syscalls keeps, not its Own slot.
func TestCounterFromSyscall(t *testing.T) {
	var s Stats
	s.Syscalls[SysUringEnter] = 7
	s.Own[0] = 3
	assert.Equal(t, int64(7), Counter{FromSyscall: true, Syscall: SysUringEnter}.Value(&s, 0))
	assert.Equal(t, int64(3), Counter{}.Value(&s, 0))
}
