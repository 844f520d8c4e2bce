package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "twinloop.ini")
	require.NoError(t, os.WriteFile(name, []byte(text), 0o644))
	return name
}

// parseConfig parses args as run does, --config included.
func parseConfig(t *testing.T, args ...string) *options {
	t.Helper()
	o, _, err := parseOptions(args)
	require.NoError(t, err, args)
	require.NoError(t, o.check(), args)
	return o
}

// TestConfigFile: every key is a flag's long name; the command line
// overrides the file, and a repeatable flag given there replaces the
// file's list.
func TestConfigFile(t *testing.T) {
	file := writeFile(t, `; a comment
# another
port = 9001
dir = /srv/www
verbose = true
header-timeout = 5s
cache-control = public, max-age=60
cache-control = .css,.js=max-age=31536000, immutable
listen = 127.0.0.1:9001
listen = [::1]:9001
backend = epoll
`)
	o := parseConfig(t, "--config", file)
	assert.Equal(t, 9001, o.Port)
	assert.Equal(t, "/srv/www", o.Dir)
	assert.True(t, o.Verbose)
	assert.Equal(t, "5s", o.HeaderTimeout.String())
	assert.Equal(t, []string{"public, max-age=60", ".css,.js=max-age=31536000, immutable"}, o.CacheControl)
	assert.Equal(t, []string{"127.0.0.1:9001", "[::1]:9001"}, o.Listen)
	assert.Equal(t, "epoll", o.Backend)
	assert.Equal(t, 75*time.Second, o.KeepAliveTimeout, "a flag the file leaves out keeps its default")

	o = parseConfig(t, "--port", "9002", "--config", file, "--listen", "127.0.0.1:9002", "-d", "/tmp")
	assert.Equal(t, 9002, o.Port, "the command line wins, before --config or after it")
	assert.Equal(t, "/tmp", o.Dir)
	assert.Equal(t, []string{"127.0.0.1:9002"}, o.Listen, "a list on the command line replaces the file's")
	assert.Len(t, o.CacheControl, 2, "a list the command line leaves alone is the file's")

	// A [section] as --write-config writes it is read too.
	o = parseConfig(t, "--config", writeFile(t, "[Application Options]\nport = 9003\n"))
	assert.Equal(t, 9003, o.Port)
	// So is a group of --help as a [section], as --write-config writes it.
	o = parseConfig(t, "--config", writeFile(t, "[Listening]\nport = 9005\n[Files and caching]\ndir = /srv/x\n[Lab: io_uring features]\nuring-buf-inc = on\n"))
	assert.Equal(t, 9005, o.Port)
	assert.Equal(t, "/srv/x", o.Dir)
	assert.Equal(t, "on", o.UringBufInc)
}

// TestWriteConfigRoundTrip: --write-config's output, fed back through
// --config, makes the same configuration, and written again is the same
// text.
func TestWriteConfigRoundTrip(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--port", "9004", "-d", dir, "-v", "--listen", "127.0.0.1:9004", "--listen", "[::1]:9004",
		"--keepalive-timeout", "3m", "--cache-control", "public, max-age=60", "--cache-control", ".css=max-age=9, immutable",
		"--backend", "uring", "--max-ranges", "0", "--precompressed", "--uring-body", "read", "--stats", "1500ms",
		"--header", "/assets/**=Cache-Tag: a=b, c", "--header", "*.js=X-Content-Type-Options: nosniff",
		"--error-page", "404=/404.html", "--error-page", "503=/busy.html", "--fallback", "/index.html"}
	code, text, errs := runMain(append(args, "--write-config")...)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, text, "port = 9004\n")
	assert.Contains(t, text, "; loops = 0\n", "a flag at its default is there, commented out")
	assert.NotContains(t, text, "write-config", "--config and --write-config are not configuration")

	file := writeFile(t, text)
	want := parseConfig(t, args...)
	got := parseConfig(t, "--config", file)
	got.Config = ""
	assert.Equal(t, want, got)

	code, again, errs := runMain("--config", file, "--write-config")
	require.Equal(t, 0, code, errs)
	assert.Equal(t, text, again)

	// The defaults alone make a file that reads back as the defaults.
	code, text, _ = runMain("--write-config")
	require.Equal(t, 0, code)
	got = parseConfig(t, "--config", writeFile(t, text))
	got.Config = ""
	assert.Equal(t, parseConfig(t), got)
}

// TestConfigErrors: an error in the file names the file, its line and
// what to do, on one line.
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		text string
		says []string
	}{
		{text: "port = 80\nprot = 81\n", says: []string{`:2: "prot = 81": unknown option: prot`, "a flag's long name"}},
		{text: "\n\nport = eighty\n", says: []string{`:3: "port = eighty": strconv.ParseInt: parsing "eighty"`, "VALUE as on the command line"}},
		{text: "backend = kqueue\n", says: []string{`:1: "backend = kqueue": Invalid value` + " `kqueue'"}},
		{text: "port\n", says: []string{`:1: "port": malformed key=value (port)`}},
		{text: "[server]\nport = 80\n", says: []string{"could not find option group `server'", "[Application Options]"}},
		{text: "port = 70000\n", says: []string{"--port 70000 is not a TCP port", "(set in --config"}},
	} {
		file := writeFile(t, tc.text)
		code, out, errs := runMain("--config", file, "-d", dir)
		assert.Equal(t, 2, code, tc.text)
		assert.Empty(t, out)
		assert.Equal(t, 1, strings.Count(errs, "\n"), "one line: %q", errs)
		for _, s := range tc.says {
			assert.Contains(t, errs, s, tc.text)
		}
		if !strings.Contains(tc.text, "[") && !strings.Contains(tc.text, "70000") {
			assert.Contains(t, errs, "--config "+file+":", "the file and line")
		}
	}
	code, _, errs := runMain("--config", filepath.Join(dir, "missing.ini"))
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "missing.ini: no such file or directory (give a readable INI file")
}

// TestININamesAreLongNames: every flag's key in --config's file is its
// long name (go-flags would take the Go field's name otherwise), in
// every group.
func TestININamesAreLongNames(t *testing.T) {
	n := 0
	var walk func(typ reflect.Type)
	walk = func(typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			long := f.Tag.Get("long")
			if long == "" {
				continue
			}
			n++
			if f.Tag.Get("no-ini") == "" {
				assert.Equal(t, long, f.Tag.Get("ini-name"), f.Name)
			}
		}
	}
	walk(reflect.TypeFor[options]())
	assert.GreaterOrEqual(t, n, 60, "every flag is seen")
}

// TestDeployConfig: the systemd unit's config file is one the server
// takes, and says what the unit used to say on its command line.
func TestDeployConfig(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/twinloop.service")
	require.NoError(t, err)
	require.Contains(t, string(unit), "--config /etc/twinloop/twinloop.ini")
	o := parseConfig(t, "--config", "../../deploy/twinloop.ini")
	assert.Equal(t, 80, o.Port)
	assert.Equal(t, "/srv/www", o.Dir)
	assert.Equal(t, "127.0.0.1:9100", o.Metrics)
	assert.True(t, o.Takeover)
}
