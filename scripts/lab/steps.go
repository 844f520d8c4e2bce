package lab

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Step is one cell of a steps file (scripts/steps/*.steps): a server,
// how it is started, and the load it is measured under. The line is
//
//	id|kind|loops|cpus|mode|size|flags|label[|connections[|rounds]]
//
// kind is epoll, uring or blocking (twinloop's backends, flags are its
// flags, env:K=V puts K=V in its environment (env:GOGC=1), and @NAME
// runs the binary labrun's -bins names NAME, to compare two builds), nginx (flags: access_log, which logs each request to a file,
// NginxFlags), gnet, fasthttp or gohttp; cpus a taskset list, or first:N
// (the first N CPUs, the client on the rest: Step.Place); mode is
// keepalive, close, pipeline16 or rate:N (keep-alive at N req/s, open
// loop, by scripts/loadgen: latency from each request's intended send
// time, p99.9 too) or cold:SET (a coldset line's files from a throttled
// disk, the step's connections asking them in a random order without
// repeats, beside the plan's hot clients on the size's cached page, at
// once: labrun's package doc) or cgi-beside (CGI alone, then CGI and
// /metrics beside keep-alive load on the size's page, then SIGTERM under
// it: labrun's cgiCell; twinloop only) or proxy:OPTS (HAProxy, its
// config from OPTS: Proxy, in front of the plan's instances servers of
// the step, wrk aimed at HAProxy; twinloop only); size 1500, 64k, 1m or cgi (a
// two-line CGI script: twinloop only); connections 50
// unless given. rounds,
// if given, is how many of the file's rounds the step runs (the first
// ones): the peers of a comparison whose interval needs many rounds may
// run fewer.
type Step struct {
	ID, Kind   string
	Loops      int
	CPUs       string // a taskset list
	Mode, Size string
	Rate       int // mode rate:N: N req/s, open loop (scripts/loadgen); 0: wrk
	Flags      []string
	Bin        string // twinloop's @NAME flag: -bins's binary NAME, not the work tree's
	Label      string
	Conns      int
	Rounds     int    // 0: every round
	Cold       string // mode cold:SET: the cold set's name (a coldset line)
	Proxy      *Proxy // mode proxy:OPTS: HAProxy in front of the plan's instances
}

// ColdSet is a coldset line's set of files under labrun's -cold-dir:
// Files files of Bytes random bytes each, named SET/00000, SET/00001, ...
type ColdSet struct {
	Files int
	Bytes int64
}

// Plan is a steps file: its steps in file order, the comparisons it
// names, and its default number of rounds.
//
// Besides step lines, a steps file may hold
//
//	compare A B    summary.md states A ÷ B, paired round by round; A and B
//	               run in one block, next to each other
//	rounds N       the run's rounds unless -rounds says otherwise
//	duration D     each measured run (a Go duration, 30s) unless -duration
//	               says otherwise
//	coldset S N B  a cold set S of N files of B bytes, for mode cold:S
//	hot N          a cold cell's clients on the cached page (4)
//	netns S C      the server runs in network namespace S, the load
//	               generator in C (ip netns exec; scripts/veth.sh makes them)
//	host ADDR      the address the server listens on and the load
//	               generator asks (127.0.0.1)
//	instances N    a proxy:OPTS cell's twinloop servers behind HAProxy (3)
//	evict          before each cell's measured run (after its warm-up and
//	               the quiet gate), the file its size asks is dropped from
//	               the page cache (POSIX_FADV_DONTNEED), as after a deploy
//	               or under memory pressure
//
// and # comments and blank lines.
type Plan struct {
	Steps     []Step
	Compares  [][2]string
	Rounds    int
	Duration  time.Duration // 0: the driver's default
	ColdSets  map[string]ColdSet
	Hot       int       // a cold cell's clients on the cached page
	Netns     [2]string // the server's and the load generator's network namespaces, or ""
	Host      string    // the address the server listens on and the load generator asks
	Instances int       // a proxy:OPTS cell's servers behind HAProxy
	Evict     bool      // each cell's file out of the page cache before its measured run
}

var kinds = []string{"epoll", "uring", "poll", "blocking", "nginx", "gnet", "fasthttp", "gohttp"}

// NginxFlags are the flags an nginx step may have: access_log turns its
// access log on (combined format, one write(2) per request, to a file in
// the cell's folder), as twinloop's -v does; without it, access_log off.
// aio_threads adds `aio threads;` beside sendfile (its default pool: 32
// threads), for cold files.
var NginxFlags = []string{"access_log", "aio_threads"}

// ParseSteps reads a steps file.
func ParseSteps(r io.Reader) (Plan, error) {
	p := Plan{Hot: 4, Host: "127.0.0.1", Instances: 3}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("steps line %d: %q: %s", n, line, fmt.Sprintf(format, a...))
		}
		if f := strings.Fields(line); !strings.Contains(line, "|") {
			switch {
			case len(f) == 3 && f[0] == "compare":
				p.Compares = append(p.Compares, [2]string{f[1], f[2]})
			case len(f) == 2 && f[0] == "duration":
				d, err := time.ParseDuration(f[1])
				if err != nil || d < time.Second {
					return p, bad("duration wants a Go duration of 1s or more")
				}
				p.Duration = d
			case len(f) == 4 && f[0] == "coldset":
				n, err := strconv.Atoi(f[2])
				b, err2 := strconv.ParseInt(f[3], 10, 64)
				if err != nil || err2 != nil || n < 1 || b < 1 {
					return p, bad("coldset wants a name, a number of files and their size in bytes")
				}
				if p.ColdSets == nil {
					p.ColdSets = map[string]ColdSet{}
				}
				p.ColdSets[f[1]] = ColdSet{Files: n, Bytes: b}
			case len(f) == 2 && f[0] == "hot":
				v, err := strconv.Atoi(f[1])
				if err != nil || v < 1 {
					return p, bad("hot wants a positive number")
				}
				p.Hot = v
			case len(f) == 3 && f[0] == "netns":
				p.Netns = [2]string{f[1], f[2]}
			case len(f) == 2 && f[0] == "instances":
				v, err := strconv.Atoi(f[1])
				if err != nil || v < 1 {
					return p, bad("instances wants a positive number")
				}
				p.Instances = v
			case len(f) == 1 && f[0] == "evict":
				p.Evict = true
			case len(f) == 2 && f[0] == "host":
				p.Host = f[1]
			case len(f) == 2 && f[0] == "rounds":
				v, err := strconv.Atoi(f[1])
				if err != nil || v < 1 {
					return p, bad("rounds wants a positive number")
				}
				p.Rounds = v
			default:
				return p, bad("want a step (id|kind|...), compare A B, rounds N, duration D, coldset S N B, hot N, netns S C, host ADDR, instances N or evict")
			}
			continue
		}
		f := strings.Split(line, "|")
		if len(f) < 8 || len(f) > 10 {
			return p, bad("want id|kind|loops|cpus|mode|size|flags|label[|connections[|rounds]]")
		}
		s := Step{ID: f[0], Kind: f[1], CPUs: f[3], Mode: f[4], Size: f[5], Flags: strings.Fields(f[6]), Label: f[7], Conns: 50}
		var err error
		if s.Loops, err = strconv.Atoi(f[2]); err != nil || s.Loops < 1 {
			return p, bad("loops wants a positive number")
		}
		if !slices.Contains(kinds, s.Kind) {
			return p, bad("kind wants one of %s", strings.Join(kinds, ", "))
		}
		if fl := s.Flags; len(fl) > 0 && strings.HasPrefix(fl[0], "@") {
			if s.Kind != "epoll" && s.Kind != "uring" && s.Kind != "blocking" {
				return p, bad("@NAME picks a twinloop binary; %s is not twinloop", s.Kind)
			}
			s.Bin, s.Flags = fl[0][1:], fl[1:]
		}
		if s.Kind == "nginx" {
			for _, fl := range s.Flags {
				if !slices.Contains(NginxFlags, fl) {
					return p, bad("nginx's flags are %s", strings.Join(NginxFlags, ", "))
				}
			}
		}
		if k, ok := strings.CutPrefix(s.CPUs, "first:"); ok {
			if v, err := strconv.Atoi(k); err != nil || v < 1 {
				return p, bad("cpus first:N wants a positive N")
			}
		} else if _, err := ParseCPUList(s.CPUs); err != nil {
			return p, bad("cpus: %v", err)
		}
		if r, ok := strings.CutPrefix(s.Mode, "rate:"); ok {
			if s.Rate, err = strconv.Atoi(r); err != nil || s.Rate < 1 {
				return p, bad("mode rate:N wants a positive N (req/s)")
			}
		} else if set, ok := strings.CutPrefix(s.Mode, "cold:"); ok {
			if _, ok := p.ColdSets[set]; !ok {
				return p, bad("mode cold:%s wants a coldset %s line before it", set, set)
			}
			s.Cold = set
		} else if opts, ok := strings.CutPrefix(s.Mode, "proxy:"); ok {
			px, err := ParseProxy(opts)
			if err != nil {
				return p, bad("%v", err)
			}
			if s.Kind != "epoll" && s.Kind != "uring" && s.Kind != "blocking" {
				return p, bad("proxy:OPTS puts HAProxy in front of twinloop, not %s", s.Kind)
			}
			s.Proxy = &px
		} else if !slices.Contains([]string{"keepalive", "close", "pipeline16", "cgi-beside"}, s.Mode) {
			return p, bad("mode wants keepalive, close, pipeline16, rate:N, cold:SET, cgi-beside or proxy:OPTS")
		}
		if s.Mode == "cgi-beside" && s.Kind != "epoll" && s.Kind != "uring" && s.Kind != "blocking" {
			return p, bad("cgi-beside is twinloop's (--cgi-dir, --metrics)")
		}
		if s.Size == "cgi" && s.Kind != "epoll" && s.Kind != "uring" && s.Kind != "blocking" {
			return p, bad("size cgi is twinloop's (--cgi-dir)")
		}
		if _, err := URLPath(s.Size); err != nil {
			return p, bad("%v", err)
		}
		if len(f) >= 9 && f[8] != "" {
			if s.Conns, err = strconv.Atoi(f[8]); err != nil || s.Conns < 1 {
				return p, bad("connections wants a positive number")
			}
		}
		if len(f) == 10 && f[9] != "" {
			if s.Rounds, err = strconv.Atoi(f[9]); err != nil || s.Rounds < 1 {
				return p, bad("rounds wants a positive number")
			}
		}
		if p.Step(s.ID) != nil {
			return p, bad("step %s twice", s.ID)
		}
		p.Steps = append(p.Steps, s)
	}
	if err := sc.Err(); err != nil {
		return p, err
	}
	if len(p.Steps) == 0 {
		return p, fmt.Errorf("steps file has no steps")
	}
	for _, s := range p.Steps {
		if s.Proxy != nil && p.Netns[0] != "" {
			return p, fmt.Errorf("step %s: proxy:OPTS runs on this host's 127.0.0.1, not in a netns", s.ID)
		}
		if p.Evict && (s.Size == "cgi" || s.Cold != "" || s.Proxy != nil || s.Mode == "cgi-beside") {
			return p, fmt.Errorf("step %s: evict drops a keep-alive, close or pipelined cell's file; %s %s has its own", s.ID, s.Mode, s.Size)
		}
	}
	for _, c := range p.Compares {
		for _, id := range c {
			if p.Step(id) == nil {
				return p, fmt.Errorf("compare %s %s: no step %s", c[0], c[1], id)
			}
		}
	}
	if p.Rounds == 0 {
		p.Rounds = 5
	}
	return p, nil
}

// Step is the step named id, or nil.
func (p Plan) Step(id string) *Step {
	for i := range p.Steps {
		if p.Steps[i].ID == id {
			return &p.Steps[i]
		}
	}
	return nil
}

// Only is the plan cut down to the steps ids names (to try a few), and
// the comparisons between them.
func (p Plan) Only(ids []string) (Plan, error) {
	q := Plan{Rounds: p.Rounds, Duration: p.Duration, ColdSets: p.ColdSets, Hot: p.Hot, Netns: p.Netns, Host: p.Host, Instances: p.Instances, Evict: p.Evict}
	for _, id := range ids {
		s := p.Step(id)
		if s == nil {
			return q, fmt.Errorf("no step %s", id)
		}
		if q.Step(id) == nil {
			q.Steps = append(q.Steps, *s)
		}
	}
	for _, c := range p.Compares {
		if q.Step(c[0]) != nil && q.Step(c[1]) != nil {
			q.Compares = append(q.Compares, c)
		}
	}
	return q, nil
}

// StepRounds is how many of a run's rounds step s runs: all of them, or,
// when the step names its own rounds, that share of them (rounded up):
// a step of 6 in a file of 15 runs 6 rounds of 15 and 3 of a QUICK 6.
func (p Plan) StepRounds(s Step, rounds int) int {
	if s.Rounds == 0 || s.Rounds >= p.Rounds {
		return rounds
	}
	return min(rounds, int(math.Ceil(float64(s.Rounds)*float64(rounds)/float64(p.Rounds))))
}

// Blocks groups the steps that must run next to each other: the steps
// joined by compare lines, each group in file order, the groups in the
// order of their first step; a step nothing compares is a block alone.
func (p Plan) Blocks() [][]string {
	group := map[string]string{} // union-find: step -> a step of its group
	var find func(string) string
	find = func(id string) string {
		if g, ok := group[id]; ok && g != id {
			r := find(g)
			group[id] = r
			return r
		}
		return id
	}
	for _, c := range p.Compares {
		a, b := find(c[0]), find(c[1])
		if a != b {
			group[b] = a
		}
	}
	var blocks [][]string
	index := map[string]int{}
	for _, s := range p.Steps {
		r := find(s.ID)
		i, ok := index[r]
		if !ok {
			i = len(blocks)
			index[r] = i
			blocks = append(blocks, nil)
		}
		blocks[i] = append(blocks[i], s.ID)
	}
	return blocks
}

// Order is round's order of the steps (round counts from 1): the blocks
// shuffled, the steps shuffled within each block, those whose rounds are
// spent left out. The shuffle is drawn from seed and round alone, so a
// seed reproduces a run's order round by round.
func (p Plan) Order(seed uint64, round, rounds int) []string {
	rng := rand.New(rand.NewPCG(seed, uint64(round)))
	blocks := p.Blocks()
	rng.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
	var out []string
	for _, b := range blocks {
		rng.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
		for _, id := range b {
			if round <= p.StepRounds(*p.Step(id), rounds) {
				out = append(out, id)
			}
		}
	}
	return out
}

// URLPath is the path asked for each fixture size (MakeDocroot). The
// small page is asked as "/", since Go's FileServer answers /index.html
// with a redirect to "./"; every server under test serves index.html
// for "/". Size cgi is labrun's two-line CGI script (twinloop only: the
// driver adds --cgi-dir), which forks and execs /bin/sh per request.
func URLPath(size string) (string, error) {
	switch size {
	case "1500":
		return "/", nil
	case "64k":
		return "/64k.html", nil
	case "1m":
		return "/1m.html", nil
	case "cgi":
		return "/cgi-bin/hello", nil
	}
	return "", fmt.Errorf("unknown size %q (1500, 64k, 1m or cgi)", size)
}
