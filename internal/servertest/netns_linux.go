package servertest

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const netnsEnv = "TWINLOOP_TEST_NETNS"

// WithMigrateReq makes sure the calling test runs where
// net.ipv4.tcp_migrate_req is 1, so that connections queued on a closing
// SO_REUSEPORT listener move to the others. If it is 1 here, it returns
// true and the test goes on. Otherwise it runs the test again in a network
// namespace of its own, with loopback up and the sysctl set there (the
// host's is left alone), passes on its verdict and output, and returns
// false: the caller returns at once. Where no namespace can be made (no
// CAP_SYS_ADMIN), the test is skipped with the reason.
func WithMigrateReq(t *testing.T) bool {
	t.Helper()
	if os.Getenv(netnsEnv) == "1" {
		if err := LoopbackUp(); err != nil {
			t.Fatalf("in the test's network namespace: %v", err)
		}
		if err := os.WriteFile("/proc/sys/net/ipv4/tcp_migrate_req", []byte("1"), 0); err != nil {
			t.Fatalf("in the test's network namespace: %v", err)
		}
		return true
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_migrate_req"); err == nil && strings.TrimSpace(string(b)) == "1" {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	out, err := cmd.CombinedOutput()
	if err != nil && cmd.ProcessState == nil {
		t.Skipf("net.ipv4.tcp_migrate_req is 0 here and no network namespace can be made to set it in (%v): run as root, or set it", err)
	}
	t.Logf("run in a network namespace of its own, with net.ipv4.tcp_migrate_req=1:\n%s", out)
	if err != nil {
		t.Fatalf("the test failed in its network namespace: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test did not run in its network namespace (no PASS line for %s)", t.Name())
	}
	return false
}

// loopbackUp brings up lo, which starts down in a new network namespace.
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return os.NewSyscallError("ioctl SIOCGIFFLAGS", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return os.NewSyscallError("ioctl SIOCSIFFLAGS", err)
	}
	return nil
}
