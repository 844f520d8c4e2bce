// Package deploy holds no code: these tests check the deployment files
// beside them (the systemd unit, the Kubernetes manifests), run the
// HAProxy TLS configuration for real, and run the operations scripts that
// need HAProxy, Prometheus or wrk (the last two under make test-ops).
package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSystemdUnit checks twinloop.service, as a plain unit and as the
// template twinloop@.service that --takeover replacements use, with
// systemd-analyze verify: any warning (unknown key, unknown system call
// group, bad value) fails the test.
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (a machine without systemd): the unit is not verified here")
	}
	unit, err := os.ReadFile("twinloop.service")
	require.NoError(t, err)
	// verify wants ExecStart's program to exist: any executable will do.
	self, err := os.Executable()
	require.NoError(t, err)
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/twinloop", self)
	require.NotEqual(t, string(unit), text, "ExecStart runs /usr/local/bin/twinloop")
	dir := t.TempDir()
	for _, name := range []string{"twinloop.service", "twinloop@.service"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	for _, name := range []string{"twinloop.service", "twinloop@blue.service"} {
		out, err := exec.Command(analyze, "verify", filepath.Join(dir, name)).CombinedOutput()
		require.NoError(t, err, "systemd-analyze verify %s:\n%s", name, out)
		require.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify %s warns", name)
	}
}

// opsScript runs one of the scripts that need real HAProxy, Prometheus or
// wrk, and load for seconds: only under make test-ops (TWINLOOP_OPS=1),
// never in make test, where they would make CI slow and depend on
// packages and fixed ports.
func opsScript(t *testing.T, need []string, env []string, script string, args ...string) {
	opsOnly(t, need...)
	cmd := exec.Command(filepath.Join("..", "scripts", script), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("scripts/%s %s:\n%s", script, strings.Join(args, " "), out)
	require.NoError(t, err)
}

func TestOpsPrometheusScrapes(t *testing.T) {
	opsScript(t, []string{"prometheus", "promtool"}, nil, "prometheus.sh")
}

func TestOpsTakeoverUnderLoad(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("scripts/takeover.sh makes a network namespace: it needs root")
	}
	opsScript(t, []string{"wrk", "unshare"}, nil, "takeover.sh", "12")
}

func TestOpsClusterRollingRestart(t *testing.T) {
	opsScript(t, []string{"haproxy", "wrk"}, []string{"CLUSTER_SECONDS=30"}, "cluster.sh")
}
