package listen

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Inodes returns the inode numbers of the sockets in fds, which name them
// in /proc/net/tcp: Shared tells a server's own listeners from another's.
func Inodes(fds [][]int) map[uint64]bool {
	ours := make(map[uint64]bool)
	for _, set := range fds {
		for _, fd := range set {
			var st unix.Stat_t
			if unix.Fstat(fd, &st) == nil {
				ours[st.Ino] = true
			}
		}
	}
	return ours
}

// Shared reports whether a listening TCP socket that is not one of ours
// (by inode) is bound to one of addrs in this network namespace: a server
// started with --takeover shares the port, and it is the one that would
// take over the connections queued on ours. /proc/net/tcp and tcp6 list
// every socket; an unreadable one counts as not shared.
func Shared(addrs []net.Addr, ours map[uint64]bool) bool {
	want := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		if ta, ok := a.(*net.TCPAddr); ok {
			want[procAddr(ta.IP, ta.Port)] = true
		}
	}
	for _, path := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if sharedIn(path, want, ours) {
			return true
		}
	}
	return false
}

// tcpListen is TCP_LISTEN in /proc/net/tcp's st column.
const tcpListen = "0A"

func sharedIn(path string, want map[string]bool, ours map[uint64]bool) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header line
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != tcpListen || !want[fields[1]] {
			continue
		}
		if ino, err := strconv.ParseUint(fields[9], 10, 64); err == nil && !ours[ino] {
			return true
		}
	}
	return false
}

// procAddr writes ip:port as /proc/net/tcp does: the address as the
// kernel's 32-bit words printed in hex, which on a little-endian machine
// (amd64, arm64) reverses each word's bytes, then the port in hex.
func procAddr(ip net.IP, port int) string {
	b := ip.To4()
	if b == nil {
		b = ip.To16()
	}
	w := make([]byte, len(b))
	for i := 0; i+4 <= len(b); i += 4 {
		w[i], w[i+1], w[i+2], w[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return fmt.Sprintf("%s:%04X", strings.ToUpper(hex.EncodeToString(w)), port)
}
