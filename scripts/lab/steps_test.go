package lab

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testSteps = `# a comment
rounds 10
et|epoll|1|0|keepalive|1500||epoll
uring|uring|1|0|keepalive|1500|--uring-wait=block|io_uring|50
et-aa|epoll|1|0|keepalive|1500||A/A
nginx|nginx|1|0|keepalive|1500||nginx|1000|4
lone|gohttp|1|0|close|64k||alone

compare uring et
compare et-aa et
compare nginx uring
`

func TestParseSteps(t *testing.T) {
	p, err := ParseSteps(strings.NewReader(testSteps))
	require.NoError(t, err)
	assert.Equal(t, 10, p.Rounds)
	require.Len(t, p.Steps, 5)
	assert.Equal(t, Step{ID: "uring", Kind: "uring", Loops: 1, CPUs: "0", Mode: "keepalive", Size: "1500",
		Flags: []string{"--uring-wait=block"}, Label: "io_uring", Conns: 50}, p.Steps[1])
	assert.Equal(t, 1000, p.Steps[3].Conns)
	r, err := ParseSteps(strings.NewReader("duration 30s\na|epoll|1|0|rate:5000|1500||x"))
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, r.Duration)
	assert.Equal(t, 5000, r.Steps[0].Rate)
	c, err := ParseSteps(strings.NewReader("coldset big 128 16777216\nhot 2\nnetns srv cli\nhost 10.77.0.1\n" +
		"a|nginx|1|0|cold:big|1500|aio_threads|x|16\nb|uring|1|0|cgi-beside|1500|env:GOGC=1|y"))
	require.NoError(t, err)
	assert.Equal(t, ColdSet{Files: 128, Bytes: 16 << 20}, c.ColdSets["big"])
	assert.Equal(t, "big", c.Steps[0].Cold)
	assert.Equal(t, 2, c.Hot)
	assert.Equal(t, [2]string{"srv", "cli"}, c.Netns)
	assert.Equal(t, "10.77.0.1", c.Host)
	o, err := c.Only([]string{"a"})
	require.NoError(t, err)
	assert.Equal(t, c.ColdSets, o.ColdSets)
	assert.Equal(t, c.Netns, o.Netns)
	e, err := ParseSteps(strings.NewReader("evict\na|uring|1|0|keepalive|1m||x|10000"))
	require.NoError(t, err)
	assert.True(t, e.Evict)
	o, err = e.Only([]string{"a"})
	require.NoError(t, err)
	assert.True(t, o.Evict)
	for _, bad := range []string{"a|epoll|1|0|cold:big|1500||x", "coldset big x 1", "a|nginx|1|0|cgi-beside|1500||x", "evict\na|uring|1|0|keepalive|cgi||x"} {
		_, err := ParseSteps(strings.NewReader(bad))
		assert.Error(t, err, bad)
	}
	b, err := ParseSteps(strings.NewReader("a|epoll|1|0|keepalive|1500|@old --sendfile=never|x"))
	require.NoError(t, err)
	assert.Equal(t, "old", b.Steps[0].Bin)
	assert.Equal(t, []string{"--sendfile=never"}, b.Steps[0].Flags)
	assert.Equal(t, 4, p.Steps[3].Rounds)
	assert.Equal(t, [][2]string{{"uring", "et"}, {"et-aa", "et"}, {"nginx", "uring"}}, p.Compares)
	assert.Equal(t, [][]string{{"et", "uring", "et-aa", "nginx"}, {"lone"}}, p.Blocks())

	for _, tc := range []struct{ name, text, err string }{
		{name: "fields", text: "a|epoll|1|0|keepalive|1500|", err: "want id|kind"},
		{name: "kind", text: "a|apache|1|0|keepalive|1500||x", err: "kind wants"},
		{name: "mode", text: "a|epoll|1|0|slow|1500||x", err: "mode wants"},
		{name: "size", text: "a|epoll|1|0|keepalive|2k||x", err: "unknown size"},
		{name: "bin", text: "a|gnet|1|0|keepalive|1500|@old|x", err: "@NAME picks a twinloop binary"},
		{name: "rate", text: "a|epoll|1|0|rate:0|1500||x", err: "mode rate:N wants a positive N"},
		{name: "duration", text: "duration 5\na|epoll|1|0|keepalive|1500||x", err: "duration wants a Go duration"},
		{name: "nginx flags", text: "a|nginx|1|0|keepalive|1500|-v|x", err: "nginx's flags are access_log"},
		{name: "cpus", text: "a|epoll|1|one|keepalive|1500||x", err: "cpus: want a CPU list"},
		{name: "cpus first", text: "a|epoll|1|first:0|keepalive|1500||x", err: "first:N wants a positive N"},
		{name: "loops", text: "a|epoll|0|0|keepalive|1500||x", err: "loops wants"},
		{name: "twice", text: "a|epoll|1|0|keepalive|1500||x\na|epoll|1|0|keepalive|1500||x", err: "step a twice"},
		{name: "compare", text: "a|epoll|1|0|keepalive|1500||x\ncompare a b", err: "no step b"},
		{name: "directive", text: "a|epoll|1|0|keepalive|1500||x\nshuffle a", err: "want a step"},
		{name: "empty", text: "# nothing\n", err: "no steps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSteps(strings.NewReader(tc.text))
			assert.ErrorContains(t, err, tc.err)
		})
	}
}

func TestOnly(t *testing.T) {
	p, err := ParseSteps(strings.NewReader(testSteps))
	require.NoError(t, err)
	q, err := p.Only([]string{"uring", "et", "lone"})
	require.NoError(t, err)
	assert.Equal(t, []string{"uring", "et", "lone"}, []string{q.Steps[0].ID, q.Steps[1].ID, q.Steps[2].ID})
	assert.Equal(t, [][2]string{{"uring", "et"}}, q.Compares)
	assert.Equal(t, 10, q.Rounds)
	_, err = p.Only([]string{"nope"})
	assert.ErrorContains(t, err, "no step nope")
}

// A step with its own rounds runs its share of the run's rounds.
func TestStepRounds(t *testing.T) {
	p := Plan{Rounds: 15}
	assert.Equal(t, 15, p.StepRounds(Step{}, 15))
	assert.Equal(t, 6, p.StepRounds(Step{Rounds: 6}, 15))
	assert.Equal(t, 3, p.StepRounds(Step{Rounds: 6}, 6))
	assert.Equal(t, 1, p.StepRounds(Step{Rounds: 6}, 1))
	assert.Equal(t, 30, p.StepRounds(Step{Rounds: 20}, 30))
}

// Every round runs each step once (while its rounds last), a block's
// steps next to each other; the same seed gives the same order, and the
// order changes between rounds and seeds.
func TestOrder(t *testing.T) {
	p, err := ParseSteps(strings.NewReader(testSteps))
	require.NoError(t, err)
	blocks := p.Blocks()
	orders := map[string]bool{}
	for round := 1; round <= 10; round++ {
		o := p.Order(7, round, 10)
		assert.Equal(t, o, p.Order(7, round, 10), "same seed, same order")
		orders[strings.Join(o, " ")] = true
		want := []string{"et", "uring", "et-aa", "lone"}
		if round <= 4 {
			want = append(want, "nginx")
		}
		assert.ElementsMatch(t, want, o, "round %d", round)
		for _, b := range blocks {
			var at []int
			for i, id := range o {
				if slices.Contains(b, id) {
					at = append(at, i)
				}
			}
			assert.Equal(t, len(at)-1, at[len(at)-1]-at[0], "round %d: block %v is not adjacent in %v", round, b, o)
		}
	}
	assert.Greater(t, len(orders), 3, "the order changes between rounds")
	differ := false
	for round := 1; round <= 10; round++ {
		differ = differ || !slices.Equal(p.Order(7, round, 10), p.Order(8, round, 10))
	}
	assert.True(t, differ, "another seed, another order")
}
