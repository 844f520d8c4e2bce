# giouring links to syscall.mmap with go:linkname, which Go >= 1.23 refuses
# unless the linker check is off. Every go command here needs it; so do you
# when you call go yourself:  export GOFLAGS=-ldflags=-checklinkname=0
export GOFLAGS := -ldflags=-checklinkname=0

BIN     := bin/server
PORT    ?= 8080
BACKEND ?= auto
ARGS    ?=

.PHONY: build run test test-short test-ops vet fmt docs fuzz bench bench-quick bench-core ladder headline lab scaling lab-kit fixed-rate cold veth kentry study syscalls clients path clean

# Linked static (no cgo: the server looks up no users or host names), which
# spares every process libc and the loader, 1.5 MB of RSS.
build:
	CGO_ENABLED=0 go build -o $(BIN) ./cmd/server

# Serves the bundled sample site on :$(PORT). Ctrl-C prints the counters.
run: build
	./$(BIN) --backend=$(BACKEND) --port $(PORT) --dir ./www $(ARGS)

# All tests under the race detector; the fuzz seed corpora run as tests.
test: vet
	scripts/test.sh

# The operations scripts, with real tools (Debian packages, installed if
# missing): a Prometheus server scrapes --metrics, three --takeover
# replacements under wrk load, three instances behind HAProxy with a
# rolling restart, and HAProxy terminating TLS and h2 in front of one
# (deploy/haproxy-tls.cfg, checked with curl). They put load on the machine
# and use ports 20200-20410 and 21700-21799: not part of make test. Take the benchmark lock:
#   flock -x /tmp/twinloop.lock make test-ops
test-ops:
	command -v prometheus >/dev/null && command -v promtool >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus
	command -v haproxy >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy
	command -v curl >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl
	command -v wrk >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk
	TWINLOOP_OPS=1 go test -count=1 -v -timeout 10m ./deploy/

test-short:
	go test -count=1 ./...

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# docs/flags.md is server --help, written by the test that checks it
# (cmd/server TestFlagsPage fails when the two differ): run after changing
# a flag.
docs:
	TWINLOOP_WRITE_DOCS=1 go test -count=1 -run '^TestFlagsPage$$' ./cmd/server/

# Runs each fuzz target for FUZZTIME (default 30s).
FUZZTIME ?= 30s
fuzz:
	go test -run XXX -fuzz FuzzParseRequest -fuzztime $(FUZZTIME) ./core/
	go test -run XXX -fuzz FuzzParseProxy -fuzztime $(FUZZTIME) ./core/

# The comparison grid (docs/lab.md, "Benchmarks"; scripts/steps/grid.steps):
# twinloop's backends against nginx, Go's net/http, gnet and fasthttp at
# c=50, 1,000 and 10,000, keep-alive and close, 1.5 KB, 64 KiB and 1 MiB,
# run by the lab's driver (as make headline below), into
# results/<date>_<commit>_grid[_quick]/: 6 rounds of 5 s, about 100
# minutes. QUICK=1 (and bench-quick): the c=50 1.5 KB cells, 6 rounds of
# 1 s, about 4 minutes.
comma := ,
empty :=
space := $(empty) $(empty)
GRID_QUICK = $(subst $(space),$(comma),$(strip $(foreach s,et uring nginx gohttp gnet fasthttp,$(s)-ka-c50-1500 $(s)-cl-c50-1500)))
bench:
	$(MAKE) lab STEPS=scripts/steps/grid.steps $(if $(filter-out 0,$(QUICK)),QUICK=1 LABRUN_ARGS="-only=$(GRID_QUICK) $(LABRUN_ARGS)")

bench-quick:
	$(MAKE) bench QUICK=1

# The syscall-reduction ladder (results/STUDY.md; scripts/steps/ladder.steps):
# each step from a blocking server to io_uring, with Go and nginx peers
# and an A/A pair per backend, run by the lab's driver: 10 rounds of 5 s,
# about 28 minutes on an idle machine (longer while the quiet gate
# waits), into results/<date>_<commit>_ladder[_quick]/. The study's other
# questions have steps files of their own under scripts/steps/, each run
# by make lab STEPS=... (results/STUDY.md, "How to rerun").
ladder:
	$(MAKE) lab STEPS=scripts/steps/ladder.steps

# The headline (issue 36; scripts/steps/headline.steps): epoll against
# io_uring, each with its A/A twin, and gnet, fasthttp and nginx, at c=50
# and c=1000 keep-alive, 1.5 KB, run by the lab's Go driver
# (scripts/labrun): every round in a new random order from a recorded
# seed, the compared steps in one block, a quiet gate before each cell,
# and summary.md with each cell's median and each ratio (paired per
# round) with its 95% interval and a p-value, bench.txt for benchstat,
# rounds.csv and env.txt, into results/<date>_<commit>_headline[_quick]/.
# 24 rounds of 5 s (c=1000's twinloop steps 20, the peers 6; 212 cells):
# about 25 minutes on an idle machine, longer while the quiet gate waits.
# QUICK=1: 6 rounds of 1 s (c=1000's twinloop steps 5, the peers 2), no
# warm-up: about 2 minutes on an idle machine once the binaries are built
# (the first build fetches the peers' modules), its summary marked QUICK. Each run also draws intervals.png. LABRUN_ARGS adds
# driver flags: -seed N reproduces an order; -rounds, -duration; -only a,b
# runs a few steps; -quiet=false, for development only, marks the run as
# not a result. Installs wrk and nginx with apt-get when missing. Take the benchmark lock:
#   flock -x /tmp/twinloop.lock make headline
# `go run ./scripts/labrun summarize DIR` rewrites a run's summary.md.
LABRUN_ARGS ?=
headline:
	bash -c 'ROOT=$$PWD; . scripts/lib.sh; need wrk nginx:nginx-light taskset:util-linux'
	go build -o bin/labrun ./scripts/labrun
	bin/labrun -steps scripts/steps/headline.steps $(if $(filter-out 0,$(QUICK)),-quick) $(LABRUN_ARGS)

# Any steps file through the same driver, into
# results/<date>_<commit>_<the file's name>[_quick]/; each file's header
# gives its command and how long it takes, e.g.
#   make lab STEPS=scripts/steps/logging.steps [QUICK=1] [LABRUN_ARGS=...]
STEPS ?= scripts/steps/headline.steps
lab:
	bash -c 'ROOT=$$PWD; . scripts/lib.sh; need wrk nginx:nginx-light taskset:util-linux'
	go build -o bin/labrun ./scripts/labrun
	bin/labrun -steps $(STEPS) $(if $(filter-out 0,$(QUICK)),-quick) $(LABRUN_ARGS)

# Loops past two cores (issue 36 item 8; scripts/steps/scaling.steps):
# epoll and io_uring with 1 to 12 loops on the first CPUs, the load
# generator on the rest, the steps this machine cannot place left out
# (-fit). On a larger machine with wrk but no package access, build the
# kit here and run it there (scaling.steps says how):
#   make lab-kit    bin/lab-kit.tar.gz: static labrun, server and loadgen, the steps files
# (there: ./labrun -steps steps/FILE -bin ./server [-loadgen ./loadgen] [-fit];
# no Go, so no gnet, fasthttp or gohttp steps, and no intervals.png).
scaling:
	bash -c 'ROOT=$$PWD; . scripts/lib.sh; need wrk taskset:util-linux'
	go build -o bin/labrun ./scripts/labrun
	bin/labrun -steps scripts/steps/scaling.steps -fit $(if $(filter-out 0,$(QUICK)),-quick) $(LABRUN_ARGS)

lab-kit:
	rm -rf bin/lab-kit && mkdir -p bin/lab-kit
	CGO_ENABLED=0 go build -o bin/lab-kit/labrun ./scripts/labrun
	CGO_ENABLED=0 go build -o bin/lab-kit/server ./cmd/server
	CGO_ENABLED=0 go build -o bin/lab-kit/loadgen ./scripts/loadgen
	cp -r scripts/steps bin/lab-kit/steps
	mkdir -p bin/lab-kit/scripts && cp scripts/pipeline.lua bin/lab-kit/scripts/
	git rev-parse --short HEAD > bin/lab-kit/COMMIT
	tar -C bin -czf bin/lab-kit.tar.gz lab-kit

# Fixed-rate load (issue 27, issue 36 item 7; scripts/steps/fixed-rate.steps):
# epoll, io_uring, gnet and nginx at offered rates from 1,000 req/s past
# saturation, open loop (scripts/loadgen, which counts latency from each
# request's intended send time, as wrk2 does), run by the lab's driver:
# p50, p99 and p99.9 each with its 95% interval across the rounds, the
# CPU per request, every run's latency histogram (latency.csv) and
# fixed-rate.png (latency percentile against offered rate, per server),
# into results/<date>_<commit>_fixed-rate[_quick]/. 6 rounds of 30 s at
# 1,000, 10,000, 40,000, 60,000 and 80,000 req/s, about 68 minutes;
# epoll and io_uring at 1,000 and 60,000 alone, about 14 (the header of
# fixed-rate.steps gives the -only); QUICK=1: rounds of 1 s, about 6.
# Take the benchmark lock:
#   flock -x /tmp/twinloop.lock make fixed-rate
fixed-rate:
	$(MAKE) lab STEPS=scripts/steps/fixed-rate.steps

# Files from a throttled disk (issue 18; scripts/steps/cold.steps): a
# one-loop server serves random uncached files (128 x 16 MiB, 20,000 x
# 16 KiB, made once under COLD_DIR=/var/tmp/twinloop-cold) to 16 clients,
# with its reads capped by a blkio cgroup the driver makes, beside 4
# clients on a cached page; twinloop epoll and io_uring against nginx with
# and without `aio threads`, randomized rounds, into
# results/<date>_<commit>_cold[_quick]/. About 12 minutes (QUICK=1: about
# 2). Needs root; take the benchmark lock:
#   flock -x /tmp/twinloop.lock make cold
cold:
	$(MAKE) lab STEPS=scripts/steps/cold.steps LABRUN_ARGS="$(if $(COLD_DIR),-cold-dir=$(COLD_DIR)) $(LABRUN_ARGS)"

# io_uring's NAPI busy polling over a veth pair (issue 28;
# scripts/steps/veth.steps): scripts/veth.sh makes two network namespaces
# joined by a veth pair with GRO on, runs the steps in them with the
# driver, and removes them. About 8 minutes (QUICK=1: about 1). As root:
#   flock -x /tmp/twinloop.lock make veth
veth:
	scripts/veth.sh $(if $(filter-out 0,$(QUICK)),--quick) $(LABRUN_ARGS)

# What one kernel entry costs on this machine (issue 36 item 5), in ns per
# call with 95% intervals: getppid raw and through the runtime,
# epoll_wait and io_uring_enter with nothing to do, a NOP round trip, a
# 1-byte write and read (AF_UNIX, TCP), sendfile against write of 1,500 B
# to TCP and the read alone (scripts/kentry). KENTRY_ROUNDS rounds, each
# running every benchmark once for KENTRY_BENCHTIME on CPU 0 in a shuffled
# order, into results/<date>_<commit>_kentry/ (bench.txt for benchstat,
# summary.md, env.txt with the mitigations). About 2 minutes. Take the
# benchmark lock:
#   flock -x /tmp/twinloop.lock make kentry
KENTRY_ROUNDS    ?= 20
KENTRY_BENCHTIME ?= 200ms
kentry:
	@mkdir -p bin
	go test -c -o bin/kentry.test ./scripts/kentry
	go run ./scripts/kentry -run -test bin/kentry.test -cpu 0 -rounds $(KENTRY_ROUNDS) -benchtime $(KENTRY_BENCHTIME)

# Every table and plot results/STUDY.md shows, regenerated from committed
# data: scripts/plot runs over each folder STUDY.md links to, with the mode
# that reads its files (grid, ladder, cold, fixed-rate, body sizes, c10k),
# and logs the folders no mode reads (their README.md is written by hand).
# No load; it rewrites summary.md and the plots in those folders. make test
# checks that the committed summary.md files are what it writes.
study:
	go run ./scripts/plot -study results/STUDY.md

# The core's Go benchmarks (allocations per request and friends).
bench-core:
	go test -run XXX -bench . -benchmem ./core/

# Which system calls a request costs, under strace (scripts/steps/syscalls.steps,
# labrun -strace: syscalls.md in the run's folder):
#   make syscalls SERVER=epoll|uring|poll|blocking|nginx|gohttp|gnet|fasthttp WORKLOAD=keepalive|close
SERVER   ?= epoll
WORKLOAD ?= keepalive
syscalls:
	bash -c 'ROOT=$$PWD; . scripts/lib.sh; need strace'
	$(MAKE) lab STEPS=scripts/steps/syscalls.steps LABRUN_ARGS="-strace -warmup=0 -rounds=1 -name=syscalls-$(SERVER)-$(WORKLOAD) -only=$(SERVER)-$(WORKLOAD) $(LABRUN_ARGS)"

# Chromium, curl and Python's email parser against both backends:
# precompressed sidecars and multipart ranges (results/clients/).
clients:
	scripts/clients-check.sh

# Which backend functions a request runs, and whether each backend's
# doc.go says so (issue 37 item 3; scripts/pathwidth): the server built
# with coverage, run with one loop and the default flags, twice per kind
# of request (a cached 1.5 KB file, a cached 1 MiB file, a warm miss), 2n
# requests then n; a function whose blocks ran 3n/4 more times in the
# first run is on the path. Prints a table (backend by kind: files /
# functions under backend/) and the lists, and fails, naming them, when a
# doc.go's "Life of a request" list names a function that did not run or
# leaves out one that did. A few hundred requests, no load; about 20 s a
# backend. Each server runs in a network namespace of its own when it can
# (root), so that the machine's other sockets do not show in its counts.
#   make path BACKENDS=epoll     one backend (or "epoll poll")
BACKENDS ?= epoll uring poll blocking
path:
	@mkdir -p bin
	go build -cover -covermode=atomic -coverpkg=./... -o bin/server.cover ./cmd/server
	go run ./scripts/pathwidth -server bin/server.cover -backends "$(BACKENDS)"

clean:
	rm -rf bin
