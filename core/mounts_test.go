package core

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestParseMountinfo(t *testing.T) {
	for _, tc := range []struct {
		line   string
		id     uint64
		fstype string
		ok     bool
	}{
		{line: "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue", id: 36, fstype: "ext3", ok: true},
		{line: "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw", id: 27, fstype: "ext4", ok: true},
		{line: "90 27 0:50 / /srv/www rw,nosuid,nodev,relatime shared:5 master:2 - fuse.sshfs host:/www rw,user_id=0", id: 90, fstype: "fuse.sshfs", ok: true},
		{line: "91 27 0:51 / /mnt/nfs rw - nfs4 srv:/x rw", id: 91, fstype: "nfs4", ok: true},
		{line: "garbage", ok: false},
		{line: "x 27 0:51 / /mnt rw - nfs4 srv:/x rw", ok: false},
		{line: "92 27 0:51 / /mnt rw no dash here at all", ok: false},
	} {
		id, fstype, ok := parseMountinfo([]byte(tc.line))
		assert.Equal(t, tc.ok, ok, tc.line)
		assert.Equal(t, tc.id, id, tc.line)
		assert.Equal(t, tc.fstype, fstype, tc.line)
	}
}

// TestMountTable: local types are local, a FUSE, NFS or unknown type is
// not, and a mount not in the table (mounted since) is learnt by reading
// mountinfo again.
func TestMountTable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mountinfo")
	was := mountinfo
	mountinfo = file
	t.Cleanup(func() { mountinfo = was })
	write := func(s string) { require.NoError(t, os.WriteFile(file, []byte(s), 0o644)) }
	write("27 1 254:0 / / rw - ext4 /dev/vda rw\n" +
		"30 27 0:27 / /dev/shm rw - tmpfs tmpfs rw\n" +
		"90 27 0:50 / /srv/a rw - fuse.sshfs h:/ rw\n" +
		"91 27 0:51 / /srv/b rw - nfs4 h:/ rw\n" +
		"92 27 0:52 / /srv/c rw - somethingnew x rw\n")
	var m mountTable
	require.NoError(t, m.load())
	for id, local := range map[uint64]bool{27: true, 30: true, 90: false, 91: false, 92: false, 93: false} {
		assert.Equal(t, local, m.local(id), "mount %d", id)
	}
	write("27 1 254:0 / / rw - ext4 /dev/vda rw\n93 27 0:53 / /srv/d rw - xfs /dev/vdb rw\n")
	m.learn(27) // known: no reread
	assert.False(t, m.local(93))
	m.learn(93)
	assert.True(t, m.local(93), "learnt from a fresh read")
}

// TestMountWatch: a mount made after start is in the table at once, by
// the watcher, before any load meets it (a mount ID freed by an unmount is
// given to the next mount, which the table must not take for the old one).
func TestMountWatch(t *testing.T) {
	var m mountTable
	require.NoError(t, m.load())
	stop := m.watch()
	defer stop()
	dir := t.TempDir()
	if err := unix.Mount("twinloop-test", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): run as root", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	id, err := mountOf(fd)
	require.NoError(t, err)
	require.Eventually(t, func() bool { fs, ok := m.known(id); return ok && fs == "tmpfs" }, 5*time.Second, time.Millisecond,
		"the watcher read the table again")
	assert.True(t, m.local(id))
}
