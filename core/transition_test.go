package core

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain makes an illegal state transition panic in every test of the
// package, in the call that makes it; a server counts it instead
// (Conn.to).
func TestMain(m *testing.M) {
	badTransition = panicOnBadTransition
	os.Exit(m.Run())
}

func panicOnBadTransition(from, to connState) {
	panic(fmt.Sprintf("core: illegal connection state transition %v → %v", from, to))
}

// recordBadTransitions replaces the panic with a record of the moves to
// reported, for the rest of the test.
func recordBadTransitions(t *testing.T) *[][2]connState {
	var got [][2]connState
	badTransition = func(from, to connState) { got = append(got, [2]connState{from, to}) }
	t.Cleanup(func() { badTransition = panicOnBadTransition })
	return &got
}

// TestConnToReportsIllegal: a move the table does not list is reported
// and counted, and made all the same; a listed one is not reported.
func TestConnToReportsIllegal(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	got := recordBadTransitions(t)
	c := l.NewConn(netipNone)
	require.Equal(t, stateReading, c.state)

	c.to(stateLingering) // lingering comes only after closing's ActLinger
	assert.Equal(t, [][2]connState{{stateReading, stateLingering}}, *got)
	assert.Equal(t, uint64(1), l.Stats.BadTransitions)
	assert.Equal(t, stateLingering, c.state, "made all the same")
	assert.Contains(t, l.Stats.String(), "bad_transitions=1")

	c.to(stateReading) // nothing leaves lingering
	assert.Equal(t, [][2]connState{{stateReading, stateLingering}, {stateLingering, stateReading}}, *got)
	assert.Equal(t, uint64(2), l.Stats.BadTransitions)
	l.FreeConn(c)

	c = l.NewConn(netipNone)
	c.Feed([]byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"))
	drain(c)
	c.Unread()
	require.Equal(t, ActLinger, c.Next())
	c.Linger() // closing → lingering: listed
	assert.Equal(t, stateLingering, c.state)
	assert.Len(t, *got, 2)
	assert.Equal(t, uint64(2), l.Stats.BadTransitions)
	l.FreeConn(c)
}

// TestConnTransitionTable walks every pair of states: to reports exactly
// the moves that transitions does not list, and the table keeps the
// shape drawn on Conn.
func TestConnTransitionTable(t *testing.T) {
	l, _ := newTestLoop(t, Config{})
	got := recordBadTransitions(t)
	c := l.NewConn(netipNone)
	listed := map[[2]connState]bool{}
	for from, tos := range transitions {
		for _, to := range tos {
			listed[[2]connState{connState(from), to}] = true
		}
	}
	for from := range numConnStates {
		for to := range numConnStates {
			*got = (*got)[:0]
			c.state = from
			c.to(to)
			move := [2]connState{from, to}
			if listed[move] {
				assert.Empty(t, *got, "%v → %v is listed", from, to)
			} else {
				assert.Equal(t, [][2]connState{move}, *got, "%v → %v is not listed", from, to)
			}
			assert.Equal(t, to, c.state)
		}
	}
	c.state = stateReading
	l.FreeConn(c)

	// Closing leads only to lingering (or the close), lingering only to
	// the close; a request's states all start from reading or writing,
	// and file ends in reading.
	assert.Equal(t, []connState{stateLingering}, transitions[stateClosing])
	assert.Empty(t, transitions[stateLingering])
	assert.Equal(t, []connState{stateReading}, transitions[stateFile])
	// Reading and proxy are where a connection starts (NewConn); proxy is
	// left for good, and once.
	assert.Equal(t, []connState{stateReading, stateClosing}, transitions[stateProxy])
	for s := range numConnStates {
		assert.NotEmpty(t, s.String())
		var into []connState
		for from, tos := range transitions {
			for _, to := range tos {
				if to == s && connState(from) != s {
					into = append(into, connState(from))
				}
			}
		}
		switch s {
		case stateReading:
		case stateProxy:
			assert.Empty(t, into, "nothing leads back to proxy")
		default:
			assert.NotEmpty(t, into, "%v cannot be reached", s)
		}
	}
}
