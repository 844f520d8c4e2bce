#!/usr/bin/env bash
# ladder.sh is the syscall-reduction study (results/STUDY.md): one row per
# step from a blocking server to io_uring, every row the same HTTP work
# (twinloop's core), then the peers, measured in interleaved rounds, into
# results/YYYY-MM-DD_<commit>_ladder/.
#
#   scripts/ladder.sh          (make ladder; about 15 minutes)
#
# Steps (c=50, 1500 B, keep-alive unless the step is about closing; one
# loop on CPU 0, wrk -t1 on CPU 1):
#
#   blocking          --backend=blocking, Connection: close (one connection
#                     at a time: with keep-alive one client would hold it)
#   lt-close          epoll level-triggered, Connection: close
#   lt-nocache        epoll LT, keep-alive, --no-file-cache (open, fstat,
#                     header built, body read, close: every request)
#   lt                epoll LT, keep-alive, file and header cache
#   et                epoll edge-triggered (the epoll default)
#   et-64k-mem, et-64k-sendfile, et-1m-mem, et-1m-sendfile
#                     a 64 KiB and a 1 MiB file from memory (--sendfile=never)
#                     or by sendfile (--sendfile=always / the default)
#   et-2loops         epoll, --loops 2 on CPU 0 (this machine has one core
#                     for the server: it shows the cost of more loops than
#                     cores, not scaling)
#   uring-each        io_uring one-shot accept/recv, one enter per SQE
#                     (--uring-multishot=off --uring-batch=off)
#   uring-batch       + one enter per loop pass (--uring-multishot=off)
#   uring-block       + multishot accept/recv with a buffer ring, the loop
#                     sleeping in a blocking enter (--uring-wait=block;
#                     the steps above have it too)
#   uring-rawsubmit   + raw non-blocking submit first (--uring-enter=raw)
#   uring-spin, uring-rawwait, uring
#                     the --uring-wait modes that spare the Go runtime's
#                     P hand-offs (backend/uring/wait_linux.go): spin, raw,
#                     and batch (the io_uring default)
#   nginx, gnet, fasthttp
#                     peers: nginx 1 worker; scripts/peers' gnet (one loop)
#                     and fasthttp (GOMAXPROCS 1)
#   et-aa, uring-aa   the et and uring servers again, last in each round:
#                     the A/A pairs, whose distance is the slots' noise
#                     (summary.md sets io_uring ÷ epoll against it)
#
# Each round runs every step once, in this order, each on a fresh server:
# warm-up, then one measured wrk run; ROUNDS rounds; the tables show
# medians. Columns: req/s and p99 (wrk), server CPU-µs per request
# (/proc/PID/stat), context switches per request (/proc/PID/task/*/status,
# voluntary + involuntary, every thread), the whole machine's, softirq's
# and wrk's CPU-µs per request (scripts/lib.sh meter_stop: every CPU of
# /proc/stat, softirq included), and syscalls per request two
# ways on a separate run of PERF_SECONDS in round 1: twinloop's own
# counters, and the whole process under perf stat -e raw_syscalls:sys_enter
# with the Go runtime's calls named (futex, nanosleep, tgkill, ...);
# io_uring's completions per request from its counters in the same run;
# the server's peak RSS (VmHWM) at the end of each measured run.
#
# Then "where each µs goes": perf record -e cpu-clock -g on the et, uring
# and nginx steps (and gnet) for ATTRIB_SECONDS under the same load, each
# sample attributed by scripts/attrib to kernel TCP/IP and loopback,
# syscall entry/exit with epoll and io_uring, other kernel work, the Go
# runtime, or the server's own code (attribution.csv, attribution.png, and
# summary.md's "where each µs goes").
#
# Environment: DURATION (3), ROUNDS (5), WARMUP (1), PERF_SECONDS (2),
# ATTRIB_SECONDS (3), STEPS (space-separated step ids, to try a few),
# ATTRIB (0 skips the perf record part), BIN, BENCH_PORT, RESULTS.
#
# The same harness runs the study's other questions from a steps file
# (scripts/steps/*.steps, one step a line in ALL_STEPS' format below, with
# an optional ninth field: the connections, 50 unless given):
#   STEPS_FILE=scripts/steps/cork.steps NAME=cork scripts/ladder.sh
# writes results/YYYY-MM-DD_<commit>_cork/; ATTRIB_IDS (space-separated
# step ids) says which steps perf record attributes (none by default).
# Installs wrk, nginx and linux-perf with apt-get when missing. Only
# 127.0.0.1 is used, and only processes this script started are signalled.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPTS=$ROOT/scripts
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"

help_only "$@"

START=$(date +%s)
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
DURATION=${DURATION:-3} ROUNDS=${ROUNDS:-5} WARMUP=${WARMUP:-1}
PERF_SECONDS=${PERF_SECONDS:-2} ATTRIB_SECONDS=${ATTRIB_SECONDS:-3} ATTRIB=${ATTRIB:-1}
SERVER_CPU=0 WRK_CPU=1
(($(nproc) >= 2)) || { log "warning: one CPU: wrk and the server share it"; WRK_CPU=0; }

# id|kind|loops|cpus|mode|size|twinloop flags|label
ALL_STEPS=(
	"blocking|blocking|1|0|close|1500||blocking, one connection at a time (Connection: close)"
	"lt-close|epoll|1|0|close|1500|--epoll-trigger=level|epoll level-triggered, Connection: close"
	"lt-nocache|epoll|1|0|keepalive|1500|--epoll-trigger=level --no-file-cache|+ keep-alive, no file cache"
	"lt|epoll|1|0|keepalive|1500|--epoll-trigger=level|+ file and header cache"
	"et|epoll|1|0|keepalive|1500||+ edge-triggered (epoll default)"
	"et-64k-mem|epoll|1|0|keepalive|64k|--sendfile=never|epoll, 64 KiB from memory"
	"et-64k-sendfile|epoll|1|0|keepalive|64k|--sendfile=always|epoll, 64 KiB by sendfile"
	"et-1m-mem|epoll|1|0|keepalive|1m|--sendfile=never|epoll, 1 MiB from memory"
	"et-1m-sendfile|epoll|1|0|keepalive|1m||epoll, 1 MiB by sendfile"
	"et-2loops|epoll|2|0|keepalive|1500||epoll, 2 loops on 1 core"
	"uring-each|uring|1|0|keepalive|1500|--uring-multishot=off --uring-batch=off --uring-wait=block|io_uring one-shot, one enter per SQE"
	"uring-batch|uring|1|0|keepalive|1500|--uring-multishot=off --uring-wait=block|+ one enter per pass"
	"uring-block|uring|1|0|keepalive|1500|--uring-wait=block|+ multishot accept/recv, buffer ring, blocking wait"
	"uring-rawsubmit|uring|1|0|keepalive|1500|--uring-wait=block --uring-enter=raw|+ raw submit before the blocking wait"
	"uring-spin|uring|1|0|keepalive|1500|--uring-wait=spin|blocking wait + spin 20 µs before sleeping"
	"uring-rawwait|uring|1|0|keepalive|1500|--uring-wait=raw|sleep raw up to 200 µs instead"
	"uring|uring|1|0|keepalive|1500||raw wait for 16 CQEs or 50 µs (io_uring default)"
	"nginx|nginx|1|0|keepalive|1500||nginx, 1 worker"
	"gnet|gnet|1|0|keepalive|1500||gnet v2 static responder, 1 loop"
	"fasthttp|fasthttp|1|0|keepalive|1500||fasthttp FS handler, GOMAXPROCS 1"
	"et-aa|epoll|1|0|keepalive|1500||A/A: the et server again, in a later slot"
	"uring-aa|uring|1|0|keepalive|1500||A/A: the uring server again, in a later slot"
)
ATTRIB_STEPS=(et uring nginx gnet)
if [[ -n ${STEPS_FILE:-} ]]; then
	mapfile -t ALL_STEPS < <(grep -v '^[[:space:]]*\(#\|$\)' "$STEPS_FILE") || die "cannot read $STEPS_FILE"
	ATTRIB_STEPS=()
fi
[[ -n ${ATTRIB_IDS:-} ]] && read -ra ATTRIB_STEPS <<<"$ATTRIB_IDS"
STEP_LIST=()
for s in "${ALL_STEPS[@]}"; do
	[[ -z ${STEPS:-} || " $STEPS " == *" ${s%%|*} "* ]] && STEP_LIST+=("$s")
done
((${#STEP_LIST[@]})) || die "STEPS=$STEPS names no step"

# --- tools and build --------------------------------------------------------
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null || missing+=(nginx)
command -v taskset >/dev/null || missing+=(util-linux)
command -v pgrep >/dev/null || missing+=(procps)
command -v perf >/dev/null || missing+=(linux-perf)
if ((${#missing[@]})); then
	apt_install "${missing[@]}" || die "apt-get install ${missing[*]} failed"
fi
perf_ok || die "perf cannot count raw_syscalls:sys_enter here (try: sysctl kernel.perf_event_paranoid=-1)"
raise_nofile 65536

lab_setup ladder

cd "$ROOT" || die "cannot cd to $ROOT"
if [[ -z ${BIN:-} ]]; then
	BIN=$ROOT/bin/server
	log "building $BIN"
	go build -o "$BIN" ./cmd/server || die "go build ./cmd/server failed"
fi
PEERS=$WORKDIR/peers PLOT=$WORKDIR/plot ATTRIB_TOOL=$WORKDIR/attrib GOHTTP=
(cd scripts/peers && go build -o "$PEERS" .) || die "go build in scripts/peers failed"
go build -o "$PLOT" ./scripts/plot || die "go build ./scripts/plot failed"
go build -o "$ATTRIB_TOOL" ./scripts/attrib || die "go build ./scripts/attrib failed"
build_wrkparse
DOCROOT=$WORKDIR/www
make_docroot "$DOCROOT"

COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo nocommit)
RESULTS=${RESULTS:-$ROOT/results}
NAME=${NAME:-ladder}
OUT=$RESULTS/$(date +%F)_${COMMIT}_$NAME
n=2
while [[ -e $OUT ]]; do
	OUT=$RESULTS/$(date +%F)_${COMMIT}_$NAME-$n
	n=$((n + 1))
done
mkdir -p "$OUT/raw"
CSV=$OUT/summary.csv
"$WRKPARSE" header ladder >"$CSV"
{
	env_header
	echo "virtualization: $(systemd-detect-virt 2>/dev/null || echo unknown)"
	echo "nginx: $(nginx -v 2>&1 | sed 's/^nginx version: //')"
	echo "wrk: $(wrk -v 2>&1 | head -1 | awk '{ print $2 }')"
	echo "perf: $(perf --version 2>&1)"
	peer_versions
	echo "load average at start (1, 5, 15 min): $LOADAVG"
	echo "placement: server CPU $SERVER_CPU unless a step says otherwise, wrk -t1 -c50 (or the step's connections) on CPU $WRK_CPU"
	echo "runs: $ROUNDS interleaved rounds; per step and round a fresh server, warm-up ${WARMUP}s, one ${DURATION}s run; round 1 adds a ${PERF_SECONDS}s run under perf stat"
	echo "attribution: perf record -e cpu-clock -g, ${ATTRIB_SECONDS}s per server"
} >"$OUT/env.txt"
log "results go to $OUT"

# The Go runtime's syscalls, named: perf stat counts each on its own.
PERF_EVENTS=raw_syscalls:sys_enter
for s in futex nanosleep clock_nanosleep tgkill rt_sigreturn getpid epoll_pwait sched_yield; do
	PERF_EVENTS+=,syscalls:sys_enter_$s
done

# perf_count FILE NAME...: the sum of those events' counts in a perf stat -x, report.
perf_count() {
	local f=$1
	shift
	awk -F, -v names=" $* " '{ n = $3; sub(/^syscalls:sys_enter_/, "", n); sub(/^raw_syscalls:/, "", n)
		if (index(names, " " n " ")) s += $1 } END { print s + 0 }' "$f"
}

declare -A PERSTEP # step -> ",own,proc,futex,sleep,signal,netpoll,cqes" from round 1

# measure_syscalls STEP KIND SIZE MODE: the perf stat run, with twinloop's
# counters read before and after it.
measure_syscalls() {
	local id=$1 kind=$2 mode=$3 path=$4 conns=$5 raw before after own='' cqes='' req f
	raw=$OUT/raw/$id-perf.txt
	[[ $kind == epoll || $kind == uring || $kind == blocking ]] && before=$(tl_settle 0)
	perf_attach stat -e "$PERF_EVENTS" -x, -o "$WORKDIR/perf.txt"
	run_wrk "$raw" "$conns" "$mode" "$path" "$PERF_SECONDS"
	sys_detach
	quiesce "${SERVER_PIDS[@]}"
	cat "$WORKDIR/perf.txt" >>"$raw"
	req=$(wrk_field "$raw" requests) || req=0
	if [[ -n ${before:-} ]]; then
		after=$(tl_settle "$(($(kv "$before" requests) + req))")
		own=$(div "$(($(kv "$after" syscalls) - $(kv "$before" syscalls)))" \
			"$(($(kv "$after" requests) - $(kv "$before" requests)))" %.3f)
		[[ $kind == uring ]] && cqes=$(div "$(($(kv "$after" cqes) - $(kv "$before" cqes)))" \
			"$(($(kv "$after" requests) - $(kv "$before" requests)))" %.3f)
		echo "counters before: $before" >>"$raw"
		echo "counters after: $after" >>"$raw"
	fi
	f=$WORKDIR/perf.txt
	PERSTEP[$id]="$own,$(div "$(perf_count "$f" sys_enter)" "$req" %.3f),$(div "$(perf_count "$f" futex)" "$req" %.3f)"
	PERSTEP[$id]+=",$(div "$(perf_count "$f" nanosleep clock_nanosleep)" "$req" %.3f)"
	PERSTEP[$id]+=",$(div "$(perf_count "$f" tgkill rt_sigreturn getpid)" "$req" %.3f),$(div "$(perf_count "$f" epoll_pwait)" "$req" %.3f),$cqes"
}

# run_step ROUND STEP-LINE: one fresh server, warm-up, (perf run), measured run.
run_step() {
	local round=$1 id kind loops cpus mode size flags label conns path raw req rss
	IFS='|' read -r id kind loops cpus mode size flags label conns <<<"$2"
	conns=${conns:-50}
	path=$(url_path "$size")
	read -ra SERVER_FLAGS <<<"$flags"
	start_server "$kind" "$loops" "$cpus" || {
		log "$id: server did not start; skipped"
		return 1
	}
	run_wrk "$WORKDIR/warmup.txt" "$conns" "$mode" "$path" "$WARMUP"
	quiesce "${SERVER_PIDS[@]}"
	((round == 1)) && measure_syscalls "$id" "$kind" "$mode" "$path" "$conns"
	raw=$OUT/raw/$id-run$round.txt
	local try
	for try in 1 2 3; do # again while other processes' CPU spoils the run
		meter_start "${SERVER_PIDS[@]}"
		run_wrk "$raw" "$conns" "$mode" "$path" "$DURATION"
		quiesce "${SERVER_PIDS[@]}"
		req=$(wrk_field "$raw" requests) || req=0
		meter_stop "$req"
		rss=$(peak_rss_kb "${SERVER_PIDS[@]}")
		((METER_NOISY)) || break
		log "round $round $id: other processes took $METER_OTHERS ticks; measured again ($try)"
	done
	stop_server
	SERVER_FLAGS=()
	local own proc futex sleep signal netpoll cqes cols
	IFS=, read -r own proc futex sleep signal netpoll cqes <<<"${PERSTEP[$id]:-,,,,,,}"
	cols=(step="$id" label="$label" run="$round" "${METER_COLS[@]}"
		own_syscalls_per_req="$own" proc_syscalls_per_req="$proc" futex_per_req="$futex"
		sleep_per_req="$sleep" signal_per_req="$signal" netpoll_per_req="$netpoll"
		conns="$conns" peak_rss_kb="$rss" cqes_per_req="$cqes")
	# A run whose report wrk did not finish keeps its row, wrk's columns empty.
	"$WRKPARSE" row ladder "$raw" "${cols[@]}" >>"$CSV" || "$WRKPARSE" row ladder - "${cols[@]}" >>"$CSV"
	log "round $round $id: $(wrk_field "$raw" rps) req/s, CPU-µs/req $METER_CPU server, $METER_MACHINE machine ($METER_SOFTIRQ softirq), $METER_CLIENT wrk; ${PERSTEP[$id]%%,*} own syscalls/req"
}

log "${#STEP_LIST[@]} steps x $ROUNDS rounds, about $(((${#STEP_LIST[@]} * (ROUNDS * (WARMUP + DURATION + 2) + PERF_SECONDS + 3) + ${#ATTRIB_STEPS[@]} * (ATTRIB_SECONDS + 6)) / 60)) min"
for ((r = 1; r <= ROUNDS; r++)); do
	for s in "${STEP_LIST[@]}"; do
		run_step "$r" "$s"
	done
done

# --- where each µs goes -------------------------------------------------------
ATT=$OUT/attribution.csv
if ((ATTRIB)); then
	echo 'step,category,samples,share' >"$ATT"
	for s in "${STEP_LIST[@]}"; do
		IFS='|' read -r id kind loops cpus mode size flags _ conns <<<"$s"
		conns=${conns:-50}
		[[ " ${ATTRIB_STEPS[*]} " == *" $id "* ]] || continue
		read -ra SERVER_FLAGS <<<"$flags"
		start_server "$kind" "$loops" "$cpus" || continue
		run_wrk "$WORKDIR/warmup.txt" "$conns" "$mode" "$(url_path "$size")" "$WARMUP"
		quiesce "${SERVER_PIDS[@]}"
		log "$id: perf record -e cpu-clock -g for ${ATTRIB_SECONDS}s"
		perf_attach record -e cpu-clock -g -F 2999 -o "$WORKDIR/$id.data"
		run_wrk "$OUT/raw/$id-attrib-wrk.txt" "$conns" "$mode" "$(url_path "$size")" "$ATTRIB_SECONDS"
		sys_detach
		stop_server
		SERVER_FLAGS=()
		perf script -i "$WORKDIR/$id.data" -F comm,tid,ip,sym,dso 2>/dev/null |
			"$ATTRIB_TOOL" -step "$id" -top "$OUT/raw/$id-attrib-top.txt" >>"$ATT" ||
			log "$id: attribution failed"
	done
fi

loadavg end >>"$OUT/env.txt"
echo "elapsed: $(($(date +%s) - START))s" >>"$OUT/env.txt"
DONE=1
"$PLOT" -ladder -dir "$OUT" || log "plot failed"
log "done in $((($(date +%s) - START) / 60))m$((($(date +%s) - START) % 60))s: $OUT"
