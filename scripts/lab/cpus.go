package lab

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Placement is where a step's server and its load generator run: two
// taskset lists, and wrk's threads (one per client CPU).
type Placement struct {
	Server, Client string
	Threads        int
}

// Place puts step s on a machine whose online CPUs are online (in
// order, OnlineCPUs). A step's cpus field is a taskset list (the server
// there, the client on wrkCPU with one thread), or first:N: the server
// on the first N CPUs and the client on all the rest, a wrk thread per
// CPU (at most one per connection), so that a larger machine's CPU sets
// are read from it, not written in the file. A step that needs a CPU the
// machine does not have is an error that says so.
func (s Step) Place(online []int, wrkCPU string) (Placement, error) {
	n, ok := strings.CutPrefix(s.CPUs, "first:")
	if !ok {
		cpus, err := ParseCPUList(s.CPUs)
		if err != nil {
			return Placement{}, fmt.Errorf("step %s: cpus %q: %v", s.ID, s.CPUs, err)
		}
		for _, c := range cpus {
			if !containsInt(online, c) {
				return Placement{}, fmt.Errorf("step %s runs its server on CPU %d; this machine's online CPUs are %s",
					s.ID, c, FormatCPUList(online))
			}
		}
		return Placement{Server: s.CPUs, Client: wrkCPU, Threads: 1}, nil
	}
	k, err := strconv.Atoi(n)
	if err != nil || k < 1 {
		return Placement{}, fmt.Errorf("step %s: cpus %q: first:N wants a positive N", s.ID, s.CPUs)
	}
	if k+1 > len(online) {
		return Placement{}, fmt.Errorf("step %s needs %d CPUs (%d for the server, at least one for the client); this machine has %d",
			s.ID, k+1, k, len(online))
	}
	return Placement{Server: FormatCPUList(online[:k]), Client: FormatCPUList(online[k:]),
		Threads: min(len(online)-k, s.Conns)}, nil
}

// OnlineCPUs is the machine's online CPUs (/sys/devices/system/cpu/online),
// or 0..NumCPU-1 where that file is missing.
func OnlineCPUs() []int {
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		if cpus, err := ParseCPUList(strings.TrimSpace(string(b))); err == nil && len(cpus) > 0 {
			return cpus
		}
	}
	var cpus []int
	for i := 0; i < runtime.NumCPU(); i++ {
		cpus = append(cpus, i)
	}
	return cpus
}

// ParseCPUList reads a taskset (cpuset) list: "0", "0-3", "0,2,4-7".
func ParseCPUList(list string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("want a CPU list such as 0, 0-3 or 0,2")
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("want a CPU list such as 0, 0-3 or 0,2")
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// FormatCPUList writes cpus (ascending) as a taskset list, runs joined:
// 0-3,6.
func FormatCPUList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
