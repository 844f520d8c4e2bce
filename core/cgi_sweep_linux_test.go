package core

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestCGIProcStat: a sweep reads state, parent, group, session and start
// time after the command name, which may hold spaces and parentheses (a
// script's name is its command name).
func TestCGIProcStat(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		setsid  bool
		session func(pid int) int
	}{
		{name: "plain", session: func(int) int { sid, _ := unix.Getsid(0); return sid }},
		{name: "a) b (c", setsid: true, session: func(pid int) int { return pid }},
		{name: ") 1 2 3", setsid: true, session: func(pid int) int { return pid }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\nread x\n"), 0o755))
			cmd := exec.Command(path)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: tc.setsid}
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { stdin.Close(); cmd.Wait() })
			pid := cmd.Process.Pid

			var st procStat
			require.Eventually(t, func() bool { // sleeping in read once the shell is up
				st, err = readProcStat(pid)
				return err == nil && st.state == 'S'
			}, 5*time.Second, 5*time.Millisecond)
			assert.Equal(t, os.Getpid(), st.ppid)
			assert.Equal(t, tc.session(pid), st.session)
			if tc.setsid {
				assert.Equal(t, pid, st.pgrp)
			}
			self, err := readProcStat(os.Getpid())
			require.NoError(t, err)
			assert.GreaterOrEqual(t, st.start, self.start, "started after the test")
		})
	}
	_, err := readProcStat(1 << 30) // no such process
	assert.Error(t, err)
}
