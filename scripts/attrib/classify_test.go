package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func chainOf(lines ...string) []frame {
	var c []frame
	for _, l := range lines {
		f, ok := parseFrame("\t ffff " + l)
		if ok {
			c = append(c, f)
		}
	}
	return c
}

func TestClassify(t *testing.T) {
	k := "([kernel.kallsyms])"
	for _, tc := range []struct {
		name  string
		chain []frame
		want  string
	}{
		{name: "copy inside tcp_recvmsg", want: "tcpip", chain: chainOf("_copy_to_iter "+k, "tcp_recvmsg_locked "+k, "sock_read_iter "+k, "vfs_read "+k, "ksys_read "+k, "do_syscall_64 "+k, "runtime.read (/srv/bin/server)")},
		{name: "fd lookup in read", want: "syscall", chain: chainOf("__fget_light "+k, "ksys_read "+k, "do_syscall_64 "+k)},
		{name: "io_uring submit", want: "syscall", chain: chainOf("_raw_spin_lock "+k, "io_submit_sqes "+k, "__do_sys_io_uring_enter "+k)},
		{name: "loopback softirq", want: "tcpip", chain: chainOf("__netif_receive_skb_one_core "+k, "process_backlog "+k, "net_rx_action "+k)},
		{name: "sleeping in io_uring_enter", want: "kernel", chain: chainOf("finish_task_switch.isra.0 "+k, "__schedule "+k, "schedule "+k, "io_cqring_wait "+k, "__do_sys_io_uring_enter "+k)},
		{name: "page fault from the runtime", want: "kernel", chain: chainOf("clear_page_erms "+k, "do_anonymous_page "+k, "runtime.mallocgc (/srv/bin/server)")},
		{name: "kernel with no known frame", want: "kernel", chain: chainOf("read_tsc " + k)},
		{name: "go runtime", want: "runtime", chain: chainOf("runtime.findRunnable (/srv/bin/server)", "runtime.schedule (/srv/bin/server)")},
		{name: "syscall stub", want: "runtime", chain: chainOf("internal/runtime/syscall/linux.Syscall6 (/srv/bin/server)")},
		{name: "twinloop", want: "server", chain: chainOf("github.com/twinloop/twinloop/core.(*Conn).parse (/srv/bin/server)")},
		{name: "nginx", want: "server", chain: chainOf("ngx_http_parse_request_line (/usr/sbin/nginx)")},
		{name: "libc", want: "libs", chain: chainOf("__memmove_avx_unaligned_erms (/usr/lib/x86_64-linux-gnu/libc.so.6)")},
		{name: "vdso", want: "libs", chain: chainOf("__vdso_clock_gettime ([vdso])")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, classify(tc.chain, isServerDSO))
		})
	}
}

func TestParseFrame(t *testing.T) {
	f, ok := parseFrame("\t          17d2cd github.com/twinloop/twinloop/core.(*Conn).serveFile (/tmp/i11server)")
	require.True(t, ok)
	assert.Equal(t, frame{sym: "github.com/twinloop/twinloop/core.(*Conn).serveFile", dso: "/tmp/i11server"}, f)
	f, ok = parseFrame("\tffffffff82203877 _raw_spin_lock+0x17 ([kernel.kallsyms])")
	require.True(t, ok)
	assert.Equal(t, frame{sym: "_raw_spin_lock", dso: "[kernel.kallsyms]"}, f)
}

// A real perf script excerpt (36 samples of the epoll backend) parses into
// 36 samples, every one in some category.
func TestRunOnPerfScript(t *testing.T) {
	in, err := os.Open("testdata/epoll.txt")
	require.NoError(t, err)
	defer in.Close()
	var out bytes.Buffer
	require.NoError(t, run(in, &out, "et", ""))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, len(categories))
	p, err := parse(strings.NewReader(mustRead(t, "testdata/epoll.txt")))
	require.NoError(t, err)
	sum := 0
	for _, c := range categories {
		sum += p.count[c]
	}
	assert.Equal(t, 36, p.total)
	assert.Equal(t, p.total, sum)
	assert.True(t, strings.HasPrefix(lines[0], "et,tcpip,"), lines[0])
}

func mustRead(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
