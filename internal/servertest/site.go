package servertest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Site writes files into a new temporary directory, removed when the test
// ends, and returns its path. A name may hold slashes: the directories on
// the way are made. A name that ends in "/" makes an empty directory (its
// content is ignored).
func Site[T string | []byte](t testing.TB, files map[string]T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			require.NoError(t, os.MkdirAll(p, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

// Scripts makes a CGI directory (core.Config.CGIDir) of POSIX sh scripts:
// each name holds "#!/bin/sh\n" and its body, executable.
func Scripts(t testing.TB, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755))
	}
	return dir
}
