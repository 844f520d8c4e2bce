package backend_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinloop/twinloop/backend"
)

// The study's baselines, blocking and poll, are chosen only by name,
// never by auto; poll runs CGI scripts, blocking does not.
func TestChooseBaselines(t *testing.T) {
	baseline := map[string]bool{"blocking": true, "poll": true}
	for name := range baseline {
		b, _, err := backend.Choose(name, backend.Options{})
		require.NoError(t, err)
		assert.Equal(t, name, b.Name())
	}
	if a, _, err := backend.Choose("auto", backend.Options{}); err == nil {
		assert.False(t, baseline[a.Name()], a.Name())
	}
	for _, b := range backend.All() {
		assert.Equal(t, !baseline[b.Name()], backend.Auto(b), b.Name())
	}
	_, _, err := backend.Choose("blocking", backend.Options{CGI: true})
	assert.ErrorContains(t, err, "cannot run CGI scripts", "--cgi-dir needs an event loop")
	_, _, err = backend.Choose("poll", backend.Options{CGI: true})
	assert.NoError(t, err, "poll watches a script's pipe")
}
