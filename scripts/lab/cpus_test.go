package lab

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCPUList(t *testing.T) {
	cpus, err := ParseCPUList("0,2-4,7")
	require.NoError(t, err)
	assert.Equal(t, []int{0, 2, 3, 4, 7}, cpus)
	assert.Equal(t, "0,2-4,7", FormatCPUList(cpus))
	for _, bad := range []string{"", "a", "3-1", "-1"} {
		_, err := ParseCPUList(bad)
		assert.Error(t, err, bad)
	}
}

// A list places the server there and the client on -wrk-cpu; first:N
// splits the machine; a step that needs more CPUs than it has is refused.
func TestPlace(t *testing.T) {
	two := []int{0, 1}
	p, err := Step{ID: "et", CPUs: "0", Conns: 50}.Place(two, "1")
	require.NoError(t, err)
	assert.Equal(t, Placement{Server: "0", Client: "1", Threads: 1}, p)

	p, err = Step{ID: "s1", CPUs: "first:1", Conns: 50}.Place(two, "1")
	require.NoError(t, err)
	assert.Equal(t, Placement{Server: "0", Client: "1", Threads: 1}, p)

	p, err = Step{ID: "s3", CPUs: "first:3", Conns: 2}.Place([]int{0, 1, 2, 3, 4, 5, 6, 7}, "1")
	require.NoError(t, err)
	assert.Equal(t, Placement{Server: "0-2", Client: "3-7", Threads: 2}, p)

	_, err = Step{ID: "s2", CPUs: "first:2", Conns: 50}.Place(two, "1")
	assert.ErrorContains(t, err, "step s2 needs 3 CPUs (2 for the server, at least one for the client); this machine has 2")
	_, err = Step{ID: "x", CPUs: "0-3", Conns: 50}.Place(two, "1")
	assert.ErrorContains(t, err, "runs its server on CPU 2")
	_, err = Step{ID: "y", CPUs: "first:0", Conns: 50}.Place(two, "1")
	assert.ErrorContains(t, err, "first:N wants a positive N")
}
