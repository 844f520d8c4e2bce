#!/usr/bin/env bash
# c10k-rss.sh says where each server's memory goes at 10,000 keep-alive
# connections on the 64 KiB page (issue 28): the k64-* cells of
# scripts/steps/uring-features-c10k.steps, one loop on CPU 0, wrk -t1
# -c10000 on CPU 1, a fresh server per run. A run is ladder.sh's sequence
# for a step (warm-up WARMUP s, a PERF_SECONDS run where ladder.sh runs
# perf, the measured DURATION s run), after which it reads the peak RSS
# (VmHWM; nginx's master and worker summed, as ladder.sh does, and each
# apart). Then one more HOLD s run, during which, every connection open,
# it reads the resident memory by kind of mapping (/proc/PID/smaps:
# io_uring's SQ/CQ rings and SQEs, the executable, anonymous memory,
# libraries) and, for twinloop, has the server write runtime/metrics'
# memory classes (SIGUSR2: the binaries are built with -tags memdump,
# cmd/server/memdump.go, whose heap profile stays off unless
# TWINLOOP_MEMPROFILERATE is set), and reads its counters.
#
#   scripts/c10k-rss.sh [LABEL=BIN ...]
#        KINDS="uring epoll" NGINX=1 CONNS=10000
#        WARMUP=1 PERF_SECONDS=2 DURATION=3 HOLD=2 FLAGS="more twinloop flags"
#        OUT=dir (default results/DATE_COMMIT_c10k-rss)
#
# Each LABEL=BIN is a twinloop built with -tags memdump; with none, the
# work tree is built as its short commit. It runs every binary's KINDS,
# then nginx (NGINX=0: none), once each: the breakdown says where the
# memory goes; the peak RSS compared in rounds, with intervals, is the
# driver's (scripts/steps/c10k.steps, uring-features-c10k.steps; run this
# again for another sample). One row per run goes to OUT/rss.tsv (appended to: a later call adds its rows), each
# run's smaps, runtime/metrics and counters to OUT/raw/. Only the servers
# and wrk it started are signalled; 127.0.0.1 only, the servers on ports
# below 32768.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPTS=$ROOT/scripts
# shellcheck source=lib.sh
source "$ROOT/scripts/lib.sh"
help_flag "${1:-}"
KINDS=${KINDS:-uring epoll}
NGINX=${NGINX:-1}
CONNS=${CONNS:-10000}
WARMUP=${WARMUP:-1}
PERF_SECONDS=${PERF_SECONDS:-2}
DURATION=${DURATION:-3}
HOLD=${HOLD:-2}
PORT_NEXT=${PORT:-18080}
WRK_CPU=1
command -v wrk >/dev/null || apt_install wrk || die "apt-get install wrk failed"
((!NGINX)) || command -v nginx >/dev/null || apt_install nginx || die "apt-get install nginx failed"
raise_nofile 65536
(($(ulimit -n) > CONNS + 100)) || die "ulimit -n is $(ulimit -n); $CONNS connections need more"
DEST=${OUT:-}
lab_setup c10k-rss
cd "$ROOT" || die "cannot cd to $ROOT"
DOCROOT=$WORKDIR/www
make_docroot "$DOCROOT"
build_wrkparse
LABELS=() BINS=()
for a in "$@"; do
	[[ $a == *=* ]] || die "not LABEL=BIN: $a"
	LABELS+=("${a%%=*}") BINS+=("${a#*=}")
done
if ((${#LABELS[@]} == 0)); then
	LABELS=("$(git rev-parse --short HEAD)") BINS=("$WORKDIR/server")
	go build -tags memdump -o "${BINS[0]}" ./cmd/server || die "go build -tags memdump ./cmd/server failed"
fi
OUT=${DEST:-$ROOT/results/$(date +%F)_$(git rev-parse --short HEAD)_c10k-rss}
mkdir -p "$OUT/raw"
TSV=$OUT/rss.tsv
[[ -s $TSV ]] || printf '%s\n' "label	kind	run	req_s	errors	peak_rss_kib	peak_rss_each_kib	rss_kib	io_uring_kib	binary_kib	anon_kib	libs_other_kib	go_heap_objects_kib	go_heap_unused_kib	go_heap_free_kib	go_stacks_kib	go_metadata_kib	go_other_kib	go_mapped_kib	buf_bytes	recv_buf_bytes	recv_nobufs	cq_ready_peak	cq_overflows" >"$TSV"
{
	env_header
	for i in "${!LABELS[@]}"; do
		echo "binary ${LABELS[$i]}: ${BINS[$i]} sha256 $(sha256sum "${BINS[$i]}" | cut -c1-12)"
	done
	echo "nginx: $(nginx -v 2>&1 | sed 's/^nginx version: //')"
	echo "wrk: $(wrk -v 2>&1 | head -1 | awk '{ print $2 }')"
	echo "runs: one per binary and kind; per binary and kind a fresh server: warm-up ${WARMUP}s, ${PERF_SECONDS}s, measured ${DURATION}s (then VmHWM), ${HOLD}s more (smaps, runtime/metrics, counters after $((HOLD - 1))s); wrk -t1 -c$CONNS /64k.html on CPU $WRK_CPU, the server on CPU 0; flags: ${FLAGS:-none}; TWINLOOP_MEMPROFILERATE=${TWINLOOP_MEMPROFILERATE:-unset}"
	loadavg start
} >>"$OUT/env.txt"

# smaps_kinds BIN PID...: "RSS IO_URING BINARY ANON OTHER", resident KiB
# of the processes by kind of mapping: io_uring's (anon_inode:[io_uring]:
# the SQ/CQ rings and the SQE array), the executable's (BIN, or nginx's),
# anonymous memory (the Go heap, stacks and runtime, and every mmap'd
# buffer), and the rest (libraries, [stack], [vdso], ...).
smaps_kinds() {
	local bin=$1 p
	shift
	for p in "$@"; do
		cat "/proc/$p/smaps" 2>/dev/null
	done | awk -v bin="$bin" '
		/^[0-9a-f]+-[0-9a-f]+ / { name = $6; for (i = 7; i <= NF; i++) name = name " " $i; next }
		/^Rss:/ {
			k = $2; rss += k
			if (name ~ /io_uring/) ur += k
			else if (name == bin || name ~ /\/nginx$/) b += k
			else if (name == "" || name == "[heap]") an += k
			else o += k
		}
		END { printf "%d %d %d %d %d\n", rss, ur, b, an, o }'
}

# metric FILE NAME: a runtime/metrics value from memdump's metrics.txt, in KiB.
metric() {
	awk -v n="$2" '$1 == n { printf "%d", $2 / 1024 }' "$1" 2>/dev/null
}

# go_cols FILE: the Go columns of rss.tsv from metrics.txt, in KiB: heap
# objects, heap unused (in spans, not objects), heap free (mapped, not
# released), stacks (goroutines' and the OS threads'), the runtime's
# metadata, its other memory, and all it has mapped.
go_cols() {
	local m=$1
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s' \
		"$(metric "$m" /memory/classes/heap/objects:bytes)" "$(metric "$m" /memory/classes/heap/unused:bytes)" \
		"$(metric "$m" /memory/classes/heap/free:bytes)" \
		"$(($(metric "$m" /memory/classes/heap/stacks:bytes) + $(metric "$m" /memory/classes/os-stacks:bytes)))" \
		"$(($(metric "$m" /memory/classes/metadata/other:bytes) + $(metric "$m" /memory/classes/metadata/mspan/inuse:bytes) + $(metric "$m" /memory/classes/metadata/mcache/inuse:bytes)))" \
		"$(metric "$m" /memory/classes/other:bytes)" "$(metric "$m" /memory/classes/total:bytes)"
}

# run_one ROUND LABEL BIN KIND: one fresh server, its runs, one row.
run_one() {
	local round=$1 label=$2 kind=$4 raw peak each mid rss ur binary anon other m counters gocols rps errs i p
	BIN=$3
	read -ra SERVER_FLAGS <<<"${FLAGS:-}"
	[[ $kind == nginx ]] && SERVER_FLAGS=()
	export TWINLOOP_MEMDUMP=$WORKDIR/dump
	rm -rf "$TWINLOOP_MEMDUMP" && mkdir -p "$TWINLOOP_MEMDUMP"
	start_server "$kind" 1 0 || return 1
	run_wrk "$WORKDIR/warmup.txt" "$CONNS" keepalive /64k.html "$WARMUP"
	quiesce "${SERVER_PIDS[@]}"
	run_wrk "$WORKDIR/perf.txt" "$CONNS" keepalive /64k.html "$PERF_SECONDS"
	quiesce "${SERVER_PIDS[@]}"
	raw=$OUT/raw/$label-$kind-run$round
	run_wrk "$raw-wrk.txt" "$CONNS" keepalive /64k.html "$DURATION"
	quiesce "${SERVER_PIDS[@]}"
	peak=$(peak_rss_kb "${SERVER_PIDS[@]}")
	each=
	for p in "${SERVER_PIDS[@]}"; do
		each+=${each:+ + }$(peak_rss_kb "$p")
	done
	(
		sleep $((HOLD - 1))
		for p in "${SERVER_PIDS[@]}"; do cat "/proc/$p/smaps"; done >"$raw-smaps.txt" 2>/dev/null
		smaps_kinds "$([[ $kind == nginx ]] || echo "$BIN")" "${SERVER_PIDS[@]}" >"$WORKDIR/kinds.txt"
		[[ $kind == nginx ]] || kill -USR2 "$SERVER_PID"
	) &
	mid=$!
	BENCH_PIDS+=("$mid")
	run_wrk "$WORKDIR/hold.txt" "$CONNS" keepalive /64k.html "$HOLD"
	wait "$mid"
	forget "$mid"
	read -r rss ur binary anon other <"$WORKDIR/kinds.txt"
	m=$TWINLOOP_MEMDUMP/metrics.txt
	counters='' gocols=$'-\t-\t-\t-\t-\t-\t-'
	if [[ $kind != nginx ]]; then
		for ((i = 0; i < 30; i++)); do
			[[ -s $m && (-z ${TWINLOOP_MEMPROFILERATE:-} || -s $TWINLOOP_MEMDUMP/heap.pprof) ]] && break
			sleep 0.1
		done
		cp "$m" "$raw-metrics.txt" 2>/dev/null
		[[ -s $TWINLOOP_MEMDUMP/heap.pprof ]] && cp "$TWINLOOP_MEMDUMP/heap.pprof" "$raw-heap.pprof"
		counters=$(tl_counters)
		echo "$counters" >"$raw-counters.txt"
		gocols=$(go_cols "$m")
	fi
	stop_server
	read -r rps errs < <(wrk_field "$raw-wrk.txt" rps errors) || rps=-
	printf '%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
		"$label" "$kind" "$round" "$rps" "${errs:-}" "$peak" "$each" "$rss" "$ur" "$binary" "$anon" "$other" "$gocols" \
		"$(kv "$counters" buf_bytes)" "$(kv "$counters" recv_buf_bytes)" "$(kv "$counters" recv_nobufs)" \
		"$(kv "$counters" cq_ready_peak)" "$(kv "$counters" cq_overflows)" | tee -a "$TSV"
}

for i in "${!LABELS[@]}"; do
	for kind in $KINDS; do
		run_one 1 "${LABELS[$i]}" "${BINS[$i]}" "$kind" || log "${LABELS[$i]} $kind: server did not start"
	done
done
((NGINX)) && { run_one 1 nginx - nginx || log "nginx did not start"; }
loadavg end >>"$OUT/env.txt"
DONE=1
