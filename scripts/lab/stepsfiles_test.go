package lab

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every steps file under scripts/steps parses, compares its steps, and
// says in its header how to run it (a make command) and about how long
// it takes.
func TestDriverStepsFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "steps", "*.steps"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			p, err := ParseSteps(bytes.NewReader(b))
			require.NoError(t, err)
			assert.Regexp(t, `(?m)^#\s+make \S+`, string(b), "the header gives the make command")
			assert.Regexp(t, `about \d+ minutes`, string(b), "the header says how long it takes")
			assert.NotEmpty(t, p.Compares, "a steps file compares its steps")
			for _, b := range p.Blocks() {
				t.Logf("block %v", b)
			}
		})
	}
}
