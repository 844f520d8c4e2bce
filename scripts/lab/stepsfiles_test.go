package lab

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every steps file under scripts/steps parses, and each compared pair is
// in one block.
func TestDriverStepsFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "steps", "*.steps"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := os.Open(path)
			require.NoError(t, err)
			defer f.Close()
			p, err := ParseSteps(f)
			require.NoError(t, err)
			assert.NotEmpty(t, p.Compares, "a steps file compares its steps")
			for _, b := range p.Blocks() {
				t.Logf("block %v", b)
			}
		})
	}
}
