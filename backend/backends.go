// Package backend is the table of event-loop backends that --backend
// chooses from, as nginx's event modules.
package backend

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/twinloop/twinloop/backend/blocking"
	"github.com/twinloop/twinloop/backend/epoll"
	"github.com/twinloop/twinloop/backend/internal/loops"
	"github.com/twinloop/twinloop/backend/poll"
	"github.com/twinloop/twinloop/backend/uring"
	"github.com/twinloop/twinloop/core"
)

// Options are the backends' own switches, for the ablation study. The
// zero value is every backend's default.
type Options struct {
	EpollLevel      bool           // --epoll-trigger=level
	EpollCork       bool           // --epoll-cork=on
	UringOneShot    bool           // --uring-multishot=off
	UringSubmitEach bool           // --uring-batch=off
	UringBody       uring.BodyMode // --uring-body
	UringRawSubmit  bool           // --uring-enter=raw
	UringWait       uring.Wait     // --uring-wait
	UringPipeBudget int64          // pipe pages io_uring's loops may hold; 0: from /proc/sys/fs (tests lower it)
	UringFeatures   uring.Features // --uring-reg-ring, --uring-skip-send, --uring-recv-bundle, --uring-buf-inc, --uring-sqpoll, --uring-wait-region, --uring-napi, --uring-send-zc, --uring-fixed-files
	CGI             bool           // --cgi-dir: only a backend that RunsCGI will do
}

// All lists every backend with default options, preferred first: auto
// takes the first one whose Probe succeeds, poll and blocking excepted
// (the study's baselines, never chosen by auto).
func All() []core.Backend { return AllWith(Options{}) }

// AllWith is All with the backends' switches set from o.
func AllWith(o Options) []core.Backend {
	ep := epoll.New()
	ep.LevelTriggered = o.EpollLevel
	ep.Cork = o.EpollCork
	ur := uring.New()
	ur.OneShot = o.UringOneShot
	ur.SubmitEach = o.UringSubmitEach
	ur.Body = o.UringBody
	ur.RawSubmit = o.UringRawSubmit
	ur.Wait = o.UringWait
	ur.PipeBudget = o.UringPipeBudget
	ur.Features = o.UringFeatures
	return []core.Backend{ur, ep, poll.New(), blocking.New()}
}

// Names are the --backend values, auto included.
func Names() []string {
	names := []string{"auto"}
	for _, b := range All() {
		names = append(names, b.Name())
	}
	return names
}

// Auto reports whether --backend=auto may choose b: the study's
// baselines are never chosen; blocking serves one connection at a time,
// and poll walks every connection on every wait (backend/poll).
func Auto(b core.Backend) bool { return b.Name() != "blocking" && b.Name() != "poll" }

// RunsCGI reports whether b can serve Config.CGIDir: the event loops watch
// a script's pipe as core.Conn.Interest names it; the blocking baseline
// waits in one blocking call at a time and refuses scripts.
func RunsCGI(b core.Backend) bool { return b.Name() != "blocking" }

// Choose returns the backend called name, after checking that it can run
// here. For "auto" it returns the first that can, and in notes the reasons
// the ones before it could not, for the operator's log.
func Choose(name string, o Options) (b core.Backend, notes []string, err error) {
	for _, cand := range AllWith(o) {
		if name != "auto" && cand.Name() != name || name == "auto" && !Auto(cand) {
			continue
		}
		perr := cand.Probe()
		if perr == nil && o.CGI && !RunsCGI(cand) {
			perr = fmt.Errorf("it cannot run CGI scripts (--cgi-dir): %w", errors.ErrUnsupported)
		}
		if perr == nil {
			return cand, notes, nil
		}
		if name != "auto" {
			return nil, nil, fmt.Errorf("backend %s cannot run here: %w (use --backend=epoll or --backend=auto)", name, perr)
		}
		notes = append(notes, fmt.Sprintf("backend %s unavailable: %v; trying the next", cand.Name(), perr))
	}
	if name == "auto" {
		return nil, notes, errors.New("no backend can run here: " + strings.Join(notes, "; "))
	}
	return nil, nil, fmt.Errorf("unknown backend %q (choose one of %s)", name, strings.Join(Names(), ", "))
}

// InjectFault is for tests only: set before Serve, f is asked by every
// loop of either backend once per pass, right after its wait, and a
// non-zero errno is taken as that wait's error (epoll_wait,
// io_uring_enter), which stops the loop and then the server.
func InjectFault(f func(loop int) syscall.Errno) { loops.Fault = f }
