package backend_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twinloop/twinloop/internal/fusetest"
)

// TestMain runs the suite, then checks that it left no child process
// behind: every CGI script must have been killed and reaped, none a zombie.
func TestMain(m *testing.M) {
	code := fusetest.Main(m)
	if kids := children(); len(kids) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left child processes behind (pid state command): %s\n", strings.Join(kids, "; "))
		code = 1
	}
	os.Exit(code)
}

// children lists this process's children as "pid state comm", zombies
// (state Z) included. A child may still be on its way out when the last
// server stopped: it has a second to go.
func children() []string {
	var kids []string
	for deadline := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		kids = kids[:0]
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(b)
			open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
			if open < 0 || close < open {
				continue
			}
			f := strings.Fields(s[close+2:]) // state, ppid, ...
			if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
				kids = append(kids, e.Name()+" "+f[0]+" "+s[open+1:close])
			}
		}
		if len(kids) == 0 || time.Now().After(deadline) {
			return kids
		}
	}
}

// TestNoZombiesNow is the same check as a test, so that it is reported by
// name: at this point of the run every script of the tests before it has
// been reaped.
func TestNoZombiesNow(t *testing.T) {
	if kids := children(); len(kids) > 0 {
		t.Errorf("child processes left behind (pid state command): %s", strings.Join(kids, "; "))
	}
}
