package main

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// categories, in the order rows are printed.
var categories = []string{"tcpip", "syscall", "kernel", "runtime", "server", "libs"}

// Kernel frames, matched from the sampled function towards its callers;
// the first match decides. Generic helpers (copies, locks, allocation)
// match nothing, so they count for whatever called them.
var kernelRules = []struct {
	cat string
	re  *regexp.Regexp
}{
	{"tcpip", regexp.MustCompile(`^(__)?(tcp|ip_|ipv4|inet|dev_|netif_|net_rx|napi|process_backlog|loopback|skb_|kfree_skb|consume_skb|alloc_skb|sk_|sock_|sockfd_|lock_sock|release_sock|local_bh_enable|do_softirq|neigh|eth_|validate_xmit|nf_|raw_v4|udp|splice_to_socket)`)},
	{"kernel", regexp.MustCompile(`^(__)?(schedule|finish_task_switch|switch_to|pick_next|dequeue_|enqueue_|update_curr|psi_|futex|hrtimer|do_nanosleep|handle_mm_fault|exc_page_fault|asm_exc_page_fault|do_anonymous_page|clear_page|pte_|tlb_|asm_sysvec|sysvec_|tick_|irq_exit|do_exit|mmput|unmap|zap_)`)},
	{"syscall", regexp.MustCompile(`^(__)?(entry_SYSCALL|do_syscall|syscall_|x64_sys|do_sys|se_sys|ksys_|sys_|exit_to_user|arch_exit|io_|tctx_|ep_|do_epoll|epoll|fdget|fget|fput|rseq|task_work_run|fd_install)`)},
}

// User-space functions of the Go runtime and standard library.
var runtimeRe = regexp.MustCompile(`^(runtime\.|runtime/|internal/|syscall\.|golang\.org/x/sys/|sync\.|sync/|time\.|aeshash|memeqbody|gogo|gosave|indexbytebody|cmpbody)`)

// frame is one line of a callchain.
type frame struct {
	sym, dso string
}

func (f frame) kernel() bool {
	return f.dso == "[kernel.kallsyms]" || strings.HasPrefix(f.dso, "[kernel")
}

// classify names a sample's category from its callchain, leaf first, and
// the binary the server's own code is in (the dso of the process itself).
func classify(chain []frame, serverDSO func(string) bool) string {
	if len(chain) == 0 {
		return "kernel"
	}
	if chain[0].kernel() {
		for _, f := range chain {
			if !f.kernel() {
				break
			}
			for _, r := range kernelRules {
				if r.re.MatchString(f.sym) {
					return r.cat
				}
			}
		}
		return "kernel"
	}
	leaf := chain[0]
	switch {
	case serverDSO(leaf.dso) && runtimeRe.MatchString(leaf.sym):
		return "runtime"
	case serverDSO(leaf.dso):
		return "server"
	}
	return "libs"
}

// profile is the parsed input.
type profile struct {
	total int
	count map[string]int
	leaf  map[frame]int
	cat   map[frame]string
}

// parse reads perf script output: a header line per sample ("comm tid"),
// then its callchain, one frame per indented line ("addr sym (dso)"),
// then a blank line.
func parse(r io.Reader) (*profile, error) {
	p := &profile{count: map[string]int{}, leaf: map[frame]int{}, cat: map[frame]string{}}
	var chain []frame
	flush := func() {
		if len(chain) == 0 {
			return
		}
		c := classify(chain, isServerDSO)
		p.total++
		p.count[c]++
		p.leaf[chain[0]]++
		p.cat[chain[0]] = c
		chain = chain[:0]
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case line[0] == '\t' || line[0] == ' ':
			if f, ok := parseFrame(line); ok {
				chain = append(chain, f)
			}
		default:
			flush() // a header: the previous sample had no blank line after it
		}
	}
	flush()
	return p, sc.Err()
}

// parseFrame reads "\t ffffffff81e35126 sock_def_readable ([kernel.kallsyms])".
func parseFrame(line string) (frame, bool) {
	line = strings.TrimSpace(line)
	_, rest, ok := strings.Cut(line, " ")
	if !ok {
		return frame{}, false
	}
	i := strings.LastIndex(rest, " (")
	if i < 0 || !strings.HasSuffix(rest, ")") {
		return frame{sym: rest}, true
	}
	sym := rest[:i]
	if j := strings.LastIndex(sym, "+0x"); j > 0 {
		sym = sym[:j]
	}
	return frame{sym: sym, dso: rest[i+2 : len(rest)-1]}, true
}

// isServerDSO: the server's own binary, as opposed to libc, the vDSO and
// the kernel. Shared libraries are named lib*.so*; nginx and the Go
// binaries are not.
func isServerDSO(dso string) bool {
	base := dso[strings.LastIndex(dso, "/")+1:]
	return dso != "" && !strings.HasPrefix(dso, "[") && !strings.Contains(base, ".so")
}

// writeTop lists the n most sampled functions.
func (p *profile) writeTop(w io.Writer, n int) {
	type kv struct {
		f frame
		n int
	}
	var all []kv
	irq := 0
	for f, c := range p.leaf {
		all = append(all, kv{f, c})
		if strings.Contains(f.sym, "irq_enable") || strings.Contains(f.sym, "irqrestore") {
			irq += c
		}
	}
	slices.SortFunc(all, func(a, b kv) int { return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.f.sym, b.f.sym)) })
	fmt.Fprintf(w, "samples: %d\nsampled function enables interrupts (irq_enable, irqrestore): %.1f%%\n\n", p.total, 100*float64(irq)/float64(p.total))
	fmt.Fprintf(w, "%6s  %-8s  %s\n", "share", "category", "function (dso)")
	for _, e := range all[:min(n, len(all))] {
		fmt.Fprintf(w, "%5.1f%%  %-8s  %s (%s)\n", 100*float64(e.n)/float64(p.total), p.cat[e.f], e.f.sym, e.f.dso)
	}
}
