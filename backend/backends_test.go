package backend_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend"
)

// The blocking baseline is chosen only by name, never by auto.
func TestChooseBlocking(t *testing.T) {
	b, _, err := backend.Choose("blocking", backend.Options{})
	require.NoError(t, err)
	assert.Equal(t, "blocking", b.Name())
	if a, _, err := backend.Choose("auto", backend.Options{}); err == nil {
		assert.NotEqual(t, "blocking", a.Name())
	}
	for _, b := range backend.All() {
		assert.Equal(t, b.Name() != "blocking", backend.Auto(b), b.Name())
	}
	_, _, err = backend.Choose("blocking", backend.Options{CGI: true})
	assert.ErrorContains(t, err, "cannot run CGI scripts", "--cgi-dir needs an event loop")
}
