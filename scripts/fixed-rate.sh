#!/usr/bin/env bash
# fixed-rate.sh measures the servers at fixed offered rates, open loop
# (issue 27, item 3): CPU per request of the server and of the whole
# machine, and latency from each request's intended send time, from
# 10,000 req/s up to saturation, into
# results/YYYY-MM-DD_<commit>_fixed-rate[_quick]/.
#
#   scripts/fixed-rate.sh [--quick]     (make fixed-rate [QUICK=1])
#
# The load generator is scripts/loadgen (no maintained open-loop HTTP/1.1
# generator is packaged here: Debian has no wrk2): C keep-alive
# connections (50), GET / (1500 bytes), request i sent at start + i/rate
# on whichever connection is free, and its latency counted from then, so
# a stall is charged for every request it held up (wrk2's correction for
# coordinated omission; scripts/loadgen's tests show it).
#
# Servers (SERVERS, default "epoll uring gnet nginx"): twinloop with
# --loops 1 and each backend, gnet with one event loop (scripts/peers),
# nginx with one worker; each on CPU 0, loadgen on CPU 1. uring is left
# out, with a note, when it does not start here.
#
# Rates (RATES, req/s, ascending): at each rate, ROUNDS rounds (1), and
# in each every server not yet saturated, in turn (interleaved): a fresh
# server, a 1 s warm-up at 10,000 req/s, then one DURATION-second run
# (3), with a 1 s drain for requests still due or in flight. A server is
# saturated when a run achieves less than 95% of the offered rate or
# leaves more than 1% of its requests unsent; it runs at no higher rate.
# The sweep ends when every server is saturated or RATES ends.
#
# --quick (QUICK=1): RATES="10000 40000 160000", DURATION=1: about a
# minute with the builds.
#
# Per run (summary.csv, the schema lab.FixedRate): rate_offered,
# rate_achieved (responses completed within the run, per second),
# p50/p99/p99.9 and max latency from the intended send time (svc_* from
# the actual send: what a closed-loop client reports; lag_* the
# generator's own delay in sending), then scripts/lib.sh meter_stop's
# measure: the server's CPU-µs per request, the whole machine's (every
# CPU of /proc/stat, softirq included), softirq's, loadgen's, and the
# server's context switches per request, all divided by the responses
# loadgen completed. env.txt has the machine, the load average before and
# after, and the settings; raw/ each loadgen report. At the end
# scripts/plot -fixedrate writes summary.md (a row per server and rate,
# medians over the rounds) and fixed-rate.png (latency and CPU-µs per
# request against the offered rate).
#
# Environment: QUICK, RATES, SERVERS, ROUNDS, DURATION, C, BIN,
# BENCH_PORT (18500), RESULTS (the results folder's parent). Installs
# nginx with apt-get when missing. Only 127.0.0.1 is used, and only
# processes this script started are signalled.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPTS=$ROOT/scripts
BENCH_PORT=${BENCH_PORT:-18500}
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"

quick_args "$@"
START=$(date +%s)
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
if ((QUICK)); then
	RATES=${RATES:-10000 40000 160000} DURATION=${DURATION:-1}
else
	RATES=${RATES:-10000 20000 40000 60000 80000 100000 120000 140000 160000 180000 200000 240000}
	DURATION=${DURATION:-3}
fi
SERVERS=${SERVERS:-epoll uring gnet nginx}
ROUNDS=${ROUNDS:-1} C=${C:-50}
SERVER_CPU=0 WRK_CPU=1
(($(nproc) >= 2)) || {
	log "warning: one CPU: loadgen and the server share it"
	WRK_CPU=0
}

[[ " $SERVERS " == *" nginx "* ]] && need nginx
need taskset:util-linux pgrep:procps
raise_nofile 65536
lab_setup fixed-rate

cd "$ROOT" || die "cannot cd to $ROOT"
build_server
LOADGEN=$WORKDIR/loadgen PEERS=$WORKDIR/peers PLOT=$WORKDIR/plot GOHTTP=
go build -o "$LOADGEN" ./scripts/loadgen || die "go build ./scripts/loadgen failed"
go build -o "$PLOT" ./scripts/plot || die "go build ./scripts/plot failed"
if [[ " $SERVERS " == *" gnet "* ]]; then
	(cd scripts/peers && go build -o "$PEERS" .) || die "go build in scripts/peers failed"
fi
build_wrkparse
DOCROOT=$WORKDIR/www
make_docroot "$DOCROOT"

COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo nocommit)
RESULTS=${RESULTS:-$ROOT/results}
NAME="$(date +%F)_${COMMIT}_fixed-rate"
((QUICK)) && NAME+=_quick
results_dir "$NAME"
CSV=$OUT/summary.csv
"$WRKPARSE" header fixedrate >"$CSV"

URING_NOTE=
if [[ " $SERVERS " == *" uring "* ]]; then
	if start_server uring 1 "$SERVER_CPU" 2>"$WORKDIR/uring-probe.txt"; then
		stop_server
	else
		URING_NOTE=$(grep -m1 'server:' "$WORKDIR/uring-probe.txt" | sed 's/^ *//')
		URING_NOTE=${URING_NOTE:-it did not start}
		log "uring skipped: $URING_NOTE"
	fi
fi
SERVER_LIST=()
for srv in $SERVERS; do
	[[ $srv == uring && -n $URING_NOTE ]] || SERVER_LIST+=("$srv")
done

{
	env_header
	echo "server binary: $BIN"
	[[ " $SERVERS " == *" nginx "* ]] && echo "nginx: $(nginx -v 2>&1 | sed 's/^nginx version: //')"
	[[ " $SERVERS " == *" gnet "* ]] && peer_versions | grep '^gnet'
	echo "load generator: scripts/loadgen, built from the work tree"
	echo "quick: $QUICK"
	echo "load average at start (1, 5, 15 min): $LOADAVG"
	echo "placement: server (one loop or worker) on CPU $SERVER_CPU, loadgen on CPU $WRK_CPU"
	echo "runs: servers ${SERVER_LIST[*]}; rates $RATES req/s; $ROUNDS round(s); per cell a fresh server, 1s warm-up at 10000 req/s, one ${DURATION}s run with $C connections on GET / (1500 B), 1s drain"
	[[ " $SERVERS " == *" uring "* ]] && echo "uring: ${URING_NOTE:+skipped: }${URING_NOTE:-measured}"
} >"$OUT/env.txt"
log "results go to $OUT"

# cell SERVER RATE ROUND: one fresh server, one run, one CSV row; returns
# 1 when the server did not keep up with RATE.
cell() {
	local srv=$1 rate=$2 round=$3 raw line req cols w sat=0 achieved unsent
	start_server "$srv" 1 "$SERVER_CPU" || {
		log "$srv: did not start; cell skipped"
		return 0
	}
	raw=$OUT/raw/$srv-$rate-round$round.txt
	run_client "$WORKDIR/warmup.txt" "$LOADGEN" -addr "$BENCH_HOST:$SERVER_PORT" -rate 10000 -c "$C" -d 1s -drain 1s
	quiesce "${SERVER_PIDS[@]}"
	meter_start "${SERVER_PIDS[@]}"
	run_client "$raw" "$LOADGEN" -addr "$BENCH_HOST:$SERVER_PORT" -rate "$rate" -c "$C" -d "${DURATION}s" -drain 1s
	quiesce "${SERVER_PIDS[@]}"
	line=$(grep -m1 '^rate_offered=' "$raw")
	req=$(kv "$line" requests)
	meter_stop "$req"
	stop_server
	if [[ -z $line ]]; then
		log "$srv at $rate: loadgen failed: $(tail -1 "$raw")"
		return 1
	fi
	achieved=$(kv "$line" rate_achieved) unsent=$(kv "$line" unsent)
	awk -v a="$achieved" -v r="$rate" -v u="$unsent" 'BEGIN { exit !(a < 0.95 * r || u > 0.01 * r) }' && sat=1
	cols=(server="$srv" round="$round" saturated="$sat" "${METER_COLS[@]}")
	for w in $line; do
		[[ ${w%%=*} == cpu_us ]] || cols+=("$w") # loadgen's own CPU: the meter has it
	done
	"$WRKPARSE" row fixedrate - "${cols[@]}" >>"$CSV"
	log "$srv at $rate req/s: $achieved achieved, p50 $(kv "$line" p50_us) p99 $(kv "$line" p99_us)" \
		"p99.9 $(kv "$line" p999_us) µs; CPU-µs/req $METER_CPU server, $METER_MACHINE machine ($METER_SOFTIRQ softirq), $METER_CLIENT loadgen$( ((sat)) && echo '; saturated')"
	return $((sat))
}

declare -A SATURATED
for rate in $RATES; do
	live=0
	for ((r = 1; r <= ROUNDS; r++)); do
		for srv in "${SERVER_LIST[@]}"; do
			[[ -n ${SATURATED[$srv]:-} ]] && continue
			live=1
			cell "$srv" "$rate" "$r" || SATURATED[$srv]=$rate
		done
	done
	((live)) || break
done

{
	loadavg end
	echo "elapsed: $(($(date +%s) - START))s"
} >>"$OUT/env.txt"
DONE=1
log "plot and summary.md"
if "$PLOT" -fixedrate -dir "$OUT"; then
	cat "$OUT/summary.md"
else
	log "plot failed"
fi
log "done in $(($(date +%s) - START))s: $OUT"
