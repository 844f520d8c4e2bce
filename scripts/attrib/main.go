// Command attrib reads `perf script -F comm,tid,ip,sym,dso` output of a
// `perf record -e cpu-clock -g` run and says where the CPU went, for
// make ladder's "where each µs goes":
//
//	perf script -i perf.data -F comm,tid,ip,sym,dso | attrib -step et [-top top.txt]
//
// It prints CSV rows "step,category,samples,share", one per category:
//
//	tcpip    kernel TCP/IP and loopback: tcp_*, ip_*, the loopback device,
//	         softirq receive, skb and socket-layer work
//	syscall  syscall entry and exit, fd lookup, epoll and io_uring machinery
//	kernel   other kernel work: scheduler, futex, timers, page faults, IRQs
//	runtime  the Go runtime and standard library (scheduler, GC, syscall
//	         hand-off, time)
//	server   the server's own code (twinloop with giouring, nginx, gnet)
//	libs     shared libraries (libc) and the vDSO
//
// A kernel sample goes to the first of tcpip, syscall or kernel that a
// frame matches, walking from the sampled function towards its callers:
// so a copy done inside tcp_recvmsg counts as TCP/IP, and the syscall
// machinery gets only what no deeper frame claims. A user-space sample
// goes by its sampled function. With -top it also writes the 25 most
// sampled functions, with their category, and the share of samples whose
// sampled function enables interrupts (on a paravirtualized guest that
// is where the cost of exits and IRQ delivery shows).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	step := flag.String("step", "", "step id written in every row")
	top := flag.String("top", "", "file to write the most sampled functions to (optional)")
	flag.Parse()
	if *step == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: perf script -F comm,tid,ip,sym,dso | attrib -step ID [-top FILE]")
		os.Exit(2)
	}
	if err := run(os.Stdin, os.Stdout, *step, *top); err != nil {
		fmt.Fprintf(os.Stderr, "attrib: %v\n", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer, step, top string) error {
	p, err := parse(in)
	if err != nil {
		return err
	}
	if p.total == 0 {
		return fmt.Errorf("no samples in the input (was perf record given -g and the right pid?)")
	}
	for _, c := range categories {
		fmt.Fprintf(out, "%s,%s,%d,%.4f\n", step, c, p.count[c], float64(p.count[c])/float64(p.total))
	}
	if top == "" {
		return nil
	}
	f, err := os.Create(top)
	if err != nil {
		return err
	}
	p.writeTop(f, 25)
	return f.Close()
}
