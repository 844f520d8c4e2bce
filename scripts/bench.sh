#!/usr/bin/env bash
# bench.sh is the comparison lab: twinloop's epoll and io_uring backends
# against nginx (1 worker and one per core) and Go's net/http file server,
# measured the same way, into results/YYYY-MM-DD_<commit>[_quick|_part]/.
#
#   scripts/bench.sh [--quick]      (make bench, make bench-quick)
#
# On a fresh Debian machine it installs wrk and nginx, builds the servers,
# makes a fixture docroot in a temp dir and runs the grid:
#
#   servers      epoll, uring (skipped with a note if it does not start),
#                nginx 1 worker, nginx N workers (N = cores), gohttp,
#                gnet and fasthttp (scripts/peers, its own Go module: the
#                fastest Go peers, one event loop / GOMAXPROCS 1)
#   connections  50, 1000, 10000
#   mode         keep-alive, Connection: close
#   file size    1500 B (index.html), 64 KiB, 1 MiB
#
# then a loops sweep (--loops / worker_processes / gnet's event loops
# 1 .. 2 x cores, c=50,
# keep-alive, 1500 B), a pipelined cell per one-loop server (16 requests
# per write, scripts/pipeline.lua) and syscall tables per server
# (scripts/syscalls.sh, syscalls.md).
#
# --quick: c=50, keep-alive and close, 1500 B, 2 runs of 3 s; the sweep at
# 2, cores and 2 x cores loops, 1 run of 2 s: under 3 minutes.
#
# Each cell gets a fresh server, one warm-up run, then RUNS measured runs;
# summary.md and the plots show medians.
#
# Placement: wrk -t1 runs on CPU 1; a one-loop server (twinloop --loops 1,
# nginx 1 worker, gohttp and fasthttp with GOMAXPROCS 1, gnet with one
# event loop) on CPU 0; a many-loop server
# on every CPU but wrk's. On a 2-core machine that is CPU 0 too, so there
# the loops sweep shows the cost of more loops than cores, not scaling.
#
# PARTS=c10k (not in the default PARTS) runs the c=10000 cells with 64 KiB
# and 1 MiB bodies, keep-alive and close, on the main grid's servers
# (issue 20), e.g. QUICK=1 PARTS="main c10k" GRID_SERVERS="epoll uring
# nginx"; cells the main grid runs already are not run twice. wrk's source
# ports start at 32768, so the servers listen below (BENCH_PORT, 18080).
#
# Per cell (summary.csv): req/s, latency p50/p99 (wrk --latency), socket
# errors, non-2xx (wrk counts status >= 400), server CPU-µs per request
# (utime+stime from /proc/PID/stat over the measured run, nginx's master
# and workers summed, / wrk's requests), peak RSS (VmHWM at the end of the
# cell, nginx's processes summed), syscalls per request, and the measure
# every lab script shares (scripts/lib.sh meter_stop): the whole machine's
# busy CPU-µs per request (every CPU of /proc/stat, softirq included),
# softirq's alone, wrk's own, and the server's context switches. Syscalls
# per request: for
# twinloop its own counters (--stats, the difference over the run), for
# nginx, gohttp, gnet and fasthttp `perf stat -e raw_syscalls:sys_enter` (or strace -c -f
# where perf cannot) on a separate run of the same cell; syscall_method
# says which. Counters count the loops' calls only; perf and strace count
# every thread's, the Go runtime's included: syscalls.md has all of them
# side by side.
#
# Environment: QUICK=1 (as --quick), DURATION, RUNS, WARMUP (seconds, runs),
# BIN (a server binary to use instead of building ./cmd/server),
# BENCH_PORT (first port tried, 18080), RESULTS (results folder).
#
# Only 127.0.0.1 is used, and only processes this script started are ever
# signalled; on exit, failure or Ctrl-C those still running are stopped.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPTS=$ROOT/scripts
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"

quick_args "$@"

START=$(date +%s)
CORES=$(nproc)
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)

# --- the grid -------------------------------------------------------------
if ((QUICK)); then
	CONNS=(50) MODES=(keepalive close) SIZES=(1500)
	DURATION=${DURATION:-3} RUNS=${RUNS:-2}
	SWEEP_DURATION=${SWEEP_DURATION:-2} SWEEP_RUNS=${SWEEP_RUNS:-1} # loops sweep and pipelined cells
	SYSCALL_SECONDS=${SYSCALL_SECONDS:-1}
else
	CONNS=(50 1000 10000) MODES=(keepalive close) SIZES=(1500 64k 1m)
	# 126 cells (108 without uring) in about 28 minutes: three 2 s runs each, 3 s at
	# 10000 connections, which take most of a second to connect.
	DURATION=${DURATION:-2} RUNS=${RUNS:-3}
	SWEEP_DURATION=${SWEEP_DURATION:-$DURATION} SWEEP_RUNS=${SWEEP_RUNS:-2}
fi
WARMUP=${WARMUP:-1}
SYSCALL_SECONDS=${SYSCALL_SECONDS:-2} # each syscalls.sh run
# The separate run that counts nginx's and gohttp's syscalls: 1 s, or as
# long as a measured run at 1000 connections and more.
PERF_SECONDS=${PERF_SECONDS:-1}
# Part of the grid only (space-separated lists), e.g. to try one heavy cell:
# GRID_CONNS=10000 GRID_SIZES=1m GRID_SERVERS="epoll nginx" PARTS=main.
[[ -n ${GRID_CONNS:-} ]] && read -ra CONNS <<<"$GRID_CONNS"
[[ -n ${GRID_MODES:-} ]] && read -ra MODES <<<"$GRID_MODES"
[[ -n ${GRID_SIZES:-} ]] && read -ra SIZES <<<"$GRID_SIZES"
GRID_SERVERS=${GRID_SERVERS:-epoll uring nginx gohttp gnet fasthttp}
PARTS=${PARTS:-main sweep pipeline syscalls}
want() { [[ " $2 " == *" $1 "* ]]; }

SERVER_CPU=0
if ((CORES >= 2)); then
	WRK_CPU=1
	MULTI_CPUS=0
	((CORES > 2)) && MULTI_CPUS="0,2-$((CORES - 1))"
else
	WRK_CPU=0 MULTI_CPUS=0
	log "warning: one CPU: wrk and the server share it"
fi

# --- tools ----------------------------------------------------------------
need wrk nginx strace taskset:util-linux pgrep:procps
# perf counts syscalls cheaply; without it, strace (slower) does.
command -v perf >/dev/null || apt_install linux-perf || log "no perf; strace will count syscalls"
if perf_ok; then SYSCALL_METHOD=perf; else SYSCALL_METHOD=strace; fi

raise_nofile 65536
NOFILE=$(ulimit -n)
if ((NOFILE < 10240)); then
	log "warning: ulimit -n is $NOFILE; dropping the 10000-connection cells"
	keep=()
	for c in "${CONNS[@]}"; do ((c <= NOFILE - 240)) && keep+=("$c"); done
	CONNS=("${keep[@]}")
fi

# --- build ----------------------------------------------------------------
lab_setup bench

cd "$ROOT" || die "cannot cd to $ROOT"
build_server
GOHTTP=$WORKDIR/gohttp
PLOT=$WORKDIR/plot
go build -o "$GOHTTP" ./scripts/gohttp || die "go build ./scripts/gohttp failed"
# The Go peers are their own module: twinloop's go.mod never sees them.
PEERS=$WORKDIR/peers
(cd scripts/peers && go build -o "$PEERS" .) || die "go build in scripts/peers failed"
go build -o "$PLOT" ./scripts/plot || die "go build ./scripts/plot failed"
build_wrkparse

DOCROOT=$WORKDIR/www
make_docroot "$DOCROOT"

# --- results folder -------------------------------------------------------
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo nocommit)
RUN_NAME="$(date +%F)_$COMMIT"
((QUICK)) && RUN_NAME+=_quick
# A part of the grid is named so, and env.txt says which part.
PARTIAL=0
[[ -n ${GRID_CONNS:-}${GRID_MODES:-}${GRID_SIZES:-} || $GRID_SERVERS != "epoll uring nginx gohttp gnet fasthttp" || $PARTS != "main sweep pipeline syscalls" ]] && PARTIAL=1
((PARTIAL && !QUICK)) && RUN_NAME+=_part
RESULTS=${RESULTS:-$ROOT/results}
results_dir "$RUN_NAME"
CSV=$OUT/summary.csv
"$WRKPARSE" header summary >"$CSV"
log "results go to $OUT"

# uring is in the grid only if the server starts with it.
URING_NOTE=
if start_server uring 1 "$SERVER_CPU" 2>"$WORKDIR/uring-probe.txt"; then
	stop_server
	BACKENDS=(epoll uring)
else
	URING_NOTE=$(grep -m1 'server:' "$WORKDIR/uring-probe.txt" | sed 's/^ *//')
	log "uring skipped: ${URING_NOTE:-it did not start}"
	BACKENDS=(epoll)
fi

{
	env_header
	echo "server binary: $BIN$([[ $BIN == "$ROOT/bin/server" ]] && echo ", built from the work tree")"
	echo "quick: $QUICK"
	((PARTIAL)) && echo "part of the grid: conns ${CONNS[*]}; modes ${MODES[*]}; sizes ${SIZES[*]}; servers $GRID_SERVERS; parts $PARTS"
	echo "nginx: $(nginx -v 2>&1 | sed 's/^nginx version: //')"
	echo "wrk: $(wrk -v 2>&1 | head -1 | awk '{ print $2 }')"
	peer_versions
	echo "load average at start (1, 5, 15 min): $LOADAVG"
	echo "placement: server CPU $SERVER_CPU (one loop), CPUs $MULTI_CPUS (several), wrk -t1 on CPU $WRK_CPU"
	echo "runs: warm-up ${WARMUP}s, then $RUNS x ${DURATION}s per cell ($((DURATION + 1))s at 10000 connections); sweep and pipelined cells $SWEEP_RUNS x ${SWEEP_DURATION}s"
	echo "syscalls per cell: twinloop counters over its measured runs; nginx, gohttp, gnet and fasthttp $SYSCALL_METHOD over a separate ${PERF_SECONDS}s run (as long as a measured run at 1000+ connections)"
	echo "ulimit -n: $(ulimit -n)"
	echo "uring: ${URING_NOTE:+skipped: }${URING_NOTE:-in the grid}"
} >"$OUT/env.txt"

# --- cells ----------------------------------------------------------------
CELLS_DONE=0

# cell BACKEND LOOPS CPUS CONNS MODE SIZE RUNS SECONDS: a fresh server, a
# warm-up, RUNS measured runs; one CSV row per run. Syscalls per request
# are counted once per cell: twinloop's counters over all its measured runs
# (the counters are published once a second, so reading them costs a wait:
# once per cell, not per run), nginx's and gohttp's with perf on a separate
# run before the measured ones.
cell() {
	local backend=$1 loops=$2 cpus=$3 conns=$4 mode=$5 size=$6 runs=$7 secs=$8
	local path tag r raw req total=0 before after method spr secs_sys rows=() line peak meter cols
	path=$(url_path "$size")
	tag="$backend-l$loops-c$conns-$mode-$size"
	((conns >= 10000)) && secs=$((secs + 1))
	start_server "$backend" "$loops" "$cpus" || {
		log "$tag: server did not start; cell skipped"
		return 1
	}
	log "$tag: warm-up ${WARMUP}s"
	run_wrk "$WORKDIR/warmup.txt" "$conns" "$mode" "$path" "$WARMUP"
	req=$(wrk_field "$WORKDIR/warmup.txt" requests) || req=0
	quiesce "${SERVER_PIDS[@]}"

	case $backend in
	epoll | uring)
		method=counters
		before=$(tl_settle "$req")
		;;
	*)
		method=$SYSCALL_METHOD
		raw="$OUT/raw/$tag-$method.txt"
		# Thousands of connections take a while to set up: count as long as
		# a measured run then.
		secs_sys=$PERF_SECONDS
		((conns >= 1000 && secs > secs_sys)) && secs_sys=$secs
		sys_attach "$method" "$WORKDIR/sys.txt" "${SERVER_PIDS[@]}"
		run_wrk "$raw" "$conns" "$mode" "$path" "$secs_sys"
		sys_detach
		quiesce "${SERVER_PIDS[@]}"
		cat "$WORKDIR/sys.txt" >>"$raw"
		spr=$(div "$(sys_total "$method" "$WORKDIR/sys.txt")" "$(wrk_field "$raw" requests)")
		;;
	esac

	for ((r = 1; r <= runs; r++)); do
		raw="$OUT/raw/$tag-run$r.txt"
		meter_start "${SERVER_PIDS[@]}"
		run_wrk "$raw" "$conns" "$mode" "$path" "$secs"
		req=$(wrk_field "$raw" requests) || req=0
		total=$((total + req))
		quiesce "${SERVER_PIDS[@]}" # closing connections is part of the run
		meter_stop "$req" %.1f
		rows+=("$r $raw ${METER_COLS[*]}")
		log "$tag run $r: $(wrk_field "$raw" rps) req/s, CPU-µs/req $METER_CPU server, $METER_MACHINE machine ($METER_SOFTIRQ softirq), $METER_CLIENT wrk"
	done
	peak=$(peak_rss_kb "${SERVER_PIDS[@]}")
	if [[ $method == counters ]]; then
		after=$(tl_settle "$(($(kv "$before" requests) + total))")
		spr=$(div "$(($(kv "$after" syscalls) - $(kv "$before" syscalls)))" \
			"$(($(kv "$after" requests) - $(kv "$before" requests)))")
	fi
	for line in "${rows[@]}"; do
		read -r r raw meter <<<"$line"
		read -ra meter <<<"$meter"
		cols=(backend="$backend" loops="$loops" conns="$conns" mode="$mode" size="$size" run="$r"
			syscalls_per_req="$spr" syscall_method="$method" peak_rss_kb="$peak" "${meter[@]}")
		# A run whose report wrk did not finish keeps its row, wrk's columns empty.
		"$WRKPARSE" row summary "$raw" "${cols[@]}" >>"$CSV" || "$WRKPARSE" row summary - "${cols[@]}" >>"$CSV"
	done
	log "$tag: $spr syscalls/req ($method), peak RSS ${peak} kB"
	stop_server
	if [[ $method == counters ]]; then
		echo "$tag: $(grep -m1 '^server: stopped' "$SERVER_LOG")" >>"$OUT/raw/servers.txt"
	fi
	CELLS_DONE=$((CELLS_DONE + 1))
}

# The servers of the main grid: "backend loops cpus".
keep=()
for b in "${BACKENDS[@]}"; do want "$b" "$GRID_SERVERS" && keep+=("$b"); done
BACKENDS=("${keep[@]}")
MAIN=()
for b in "${BACKENDS[@]}"; do MAIN+=("$b 1 $SERVER_CPU"); done
if want nginx "$GRID_SERVERS"; then
	MAIN+=("nginx 1 $SERVER_CPU")
	((CORES > 1)) && MAIN+=("nginx $CORES $MULTI_CPUS")
fi
want gohttp "$GRID_SERVERS" && MAIN+=("gohttp 1 $SERVER_CPU")
want gnet "$GRID_SERVERS" && MAIN+=("gnet 1 $SERVER_CPU")
want fasthttp "$GRID_SERVERS" && MAIN+=("fasthttp 1 $SERVER_CPU")

# in_main BACKEND LOOPS: whether the main grid has that server.
in_main() {
	local srv mb ml
	for srv in "${MAIN[@]}"; do
		read -r mb ml _ <<<"$srv"
		[[ $mb == "$1" && $ml == "$2" ]] && return 0
	done
	return 1
}

# The loops sweep runs --loops (nginx: workers) 1 .. 2 x cores on every CPU
# but wrk's; the (backend, loops) pairs of the main grid are not run again.
# A quick run sweeps 2, cores and 2 x cores only.
if ((QUICK)); then
	mapfile -t SWEEP_LOOPS < <(printf '%s\n' 2 "$CORES" $((2 * CORES)) | sort -nu)
else
	mapfile -t SWEEP_LOOPS < <(seq 1 $((2 * CORES)))
fi
SWEEP=()
for b in "${BACKENDS[@]}" nginx gnet; do
	[[ $b == nginx || $b == gnet ]] && ! want "$b" "$GRID_SERVERS" && continue
	for l in "${SWEEP_LOOPS[@]}"; do
		in_main "$b" "$l" || SWEEP+=("$b $l $MULTI_CPUS")
	done
done
# The pipelined cell runs on the one-loop servers.
PIPE=()
for srv in "${MAIN[@]}"; do
	read -r b l _ <<<"$srv"
	((l == 1)) && PIPE+=("$srv")
done
SYS=("${BACKENDS[@]}")
for b in nginx gohttp gnet fasthttp; do want "$b" "$GRID_SERVERS" && SYS+=("$b"); done
# The c10k part: "backend loops cpus mode size" for each c=10000 cell the
# main grid does not run already.
C10K=()
if want c10k "$PARTS"; then
	if ((NOFILE < 10240)); then
		log "warning: ulimit -n is $NOFILE; the c10k part needs 10240: skipped"
	else
		for srv in "${MAIN[@]}"; do
			for m in keepalive close; do
				for s in 64k 1m; do
					want main "$PARTS" && want 10000 "${CONNS[*]}" && want "$m" "${MODES[*]}" &&
						want "$s" "${SIZES[*]}" && continue
					C10K+=("$srv $m $s")
				done
			done
		done
	fi
fi
GRID=("${MAIN[@]}")
want main "$PARTS" || GRID=()
want sweep "$PARTS" || SWEEP=()
want pipeline "$PARTS" || PIPE=()
want syscalls "$PARTS" || SYS=()

ncells=$((${#GRID[@]} * ${#CONNS[@]} * ${#MODES[@]} * ${#SIZES[@]}))
n10k=0
want 10000 "${CONNS[*]}" && n10k=$((${#GRID[@]} * ${#MODES[@]} * ${#SIZES[@]}))
# Seconds per cell beyond the runs, measured: ~3 for twinloop, ~4 with perf.
per_cell=$((WARMUP + RUNS * DURATION + 4))
per_sweep=$((WARMUP + SWEEP_RUNS * SWEEP_DURATION + 4))
log "grid: $ncells cells x ~${per_cell}s, ${#C10K[@]} c10k cells x ~$((per_cell + RUNS))s," \
	"${#SWEEP[@]} sweep and ${#PIPE[@]} pipelined cells x ~${per_sweep}s," \
	"$((${#SYS[@]} * 2)) syscall tables x ~$((SYSCALL_SECONDS + 2))s: about" \
	"$((((ncells + ${#C10K[@]}) * per_cell + (n10k + ${#C10K[@]}) * RUNS + (${#SWEEP[@]} + ${#PIPE[@]}) * per_sweep + ${#SYS[@]} * 2 * (SYSCALL_SECONDS + 2) + 30) / 60)) min"

for srv in "${GRID[@]}"; do
	read -r b l cpus <<<"$srv"
	for c in "${CONNS[@]}"; do
		for m in "${MODES[@]}"; do
			for s in "${SIZES[@]}"; do
				cell "$b" "$l" "$cpus" "$c" "$m" "$s" "$RUNS" "$DURATION"
			done
		done
	done
done
for srv in "${C10K[@]}"; do
	read -r b l cpus m s <<<"$srv"
	cell "$b" "$l" "$cpus" 10000 "$m" "$s" "$RUNS" "$DURATION"
done
for srv in "${SWEEP[@]}"; do
	read -r b l cpus <<<"$srv"
	cell "$b" "$l" "$cpus" 50 keepalive 1500 "$SWEEP_RUNS" "$SWEEP_DURATION"
done
for srv in "${PIPE[@]}"; do
	read -r b l cpus <<<"$srv"
	cell "$b" "$l" "$cpus" 50 pipeline16 1500 "$SWEEP_RUNS" "$SWEEP_DURATION"
done

# --- syscall tables -------------------------------------------------------
((${#SYS[@]})) && {
	echo "# System calls per request"
	echo
	echo "Each table is one run of \`scripts/syscalls.sh BACKEND WORKLOAD\`: wrk -t1 -c50"
	echo "for ${SYSCALL_SECONDS}s on index.html (1500 B) against a fresh server (one loop or"
	echo "worker, CPU $SERVER_CPU) under \`strace -c -f\`, every count divided by the"
	echo "requests wrk completed; setting up the 50 connections is part of the run."
	echo "strace slows the server down several times, so"
	echo "batching (events per epoll_wait, completions per io_uring_enter) differs"
	echo "from an unobserved run; for twinloop its own counters over the same window"
	echo "are beside strace's column, and they should agree on every call the loop"
	echo "makes. Calls only strace sees (futex, nanosleep, ...) are the Go runtime's."
	echo
} >"$OUT/syscalls.md"
for b in "${SYS[@]}"; do
	for w in keepalive close; do
		log "syscalls.md: $b $w"
		BIN=$BIN GOHTTP=$GOHTTP PEERS=$PEERS DOCROOT=$DOCROOT WORKDIR=$WORKDIR \
			SERVER_CPU=$SERVER_CPU WRK_CPU=$WRK_CPU BENCH_PORT=$PORT_NEXT \
			"$SCRIPTS/syscalls.sh" "$b" "$w" "$SYSCALL_SECONDS" >>"$OUT/syscalls.md" ||
			log "syscalls.sh $b $w failed"
		PORT_NEXT=$((PORT_NEXT + 5))
	done
done

# --- summary and plots ----------------------------------------------------
loadavg end >>"$OUT/env.txt"
echo "elapsed: $(($(date +%s) - START))s" >>"$OUT/env.txt"
DONE=1
log "plots and summary.md"
"$PLOT" -dir "$OUT" -readme "$RESULTS/README.md" || log "plot failed"
log "done: $CELLS_DONE cells in $((($(date +%s) - START) / 60))m$((($(date +%s) - START) % 60))s: $OUT"
