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
)

// Step is one cell of a steps file (scripts/steps/*.steps): a server,
// how it is started, and the load it is measured under. The line is
//
//	id|kind|loops|cpus|mode|size|flags|label[|connections[|rounds]]
//
// kind is epoll, uring or blocking (twinloop's backends, flags are its
// flags), nginx, gnet, fasthttp or gohttp; mode is keepalive, close or
// pipeline16; size 1500, 64k or 1m; connections 50 unless given. rounds,
// if given, is how many of the file's rounds the step runs (the first
// ones): the peers of a comparison whose interval needs many rounds may
// run fewer.
type Step struct {
	ID, Kind   string
	Loops      int
	CPUs       string // a taskset list
	Mode, Size string
	Flags      []string
	Label      string
	Conns      int
	Rounds     int // 0: every round
}

// Plan is a steps file: its steps in file order, the comparisons it
// names, and its default number of rounds.
//
// Besides step lines, a steps file may hold
//
//	compare A B    summary.md states A ÷ B, paired round by round; A and B
//	               run in one block, next to each other
//	rounds N       the run's rounds unless -rounds says otherwise
//
// and # comments and blank lines.
type Plan struct {
	Steps    []Step
	Compares [][2]string
	Rounds   int
}

var kinds = []string{"epoll", "uring", "poll", "blocking", "nginx", "gnet", "fasthttp", "gohttp"}

// ParseSteps reads a steps file.
func ParseSteps(r io.Reader) (Plan, error) {
	var p Plan
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
			case len(f) == 2 && f[0] == "rounds":
				v, err := strconv.Atoi(f[1])
				if err != nil || v < 1 {
					return p, bad("rounds wants a positive number")
				}
				p.Rounds = v
			default:
				return p, bad("want a step (id|kind|...), compare A B or rounds N")
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
		if !slices.Contains([]string{"keepalive", "close", "pipeline16"}, s.Mode) {
			return p, bad("mode wants keepalive, close or pipeline16")
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
	q := Plan{Rounds: p.Rounds}
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
// for "/".
func URLPath(size string) (string, error) {
	switch size {
	case "1500":
		return "/", nil
	case "64k":
		return "/64k.html", nil
	case "1m":
		return "/1m.html", nil
	}
	return "", fmt.Errorf("unknown size %q (1500, 64k or 1m)", size)
}
