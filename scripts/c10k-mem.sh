#!/usr/bin/env bash
# c10k-mem.sh measures what 10,000 connections cost in memory and CPU
# (issue 20): wrk -t1 -c10000 on the 64 KiB page (sent from memory),
# keep-alive and Connection: close, for two twinloop binaries (each
# backend) and nginx (1 worker), the binaries interleaved run by run. The
# server runs on CPU 0 and listens below 32768 (wrk's 10,000 source ports
# come from the ephemeral range above it), wrk on CPU 1. It prints one
# line per run: server, backend, mode, run, req/s, server CPU-µs per
# request (utime+stime from /proc/PID/stat over the measured run), peak
# RSS (VmHWM from /proc/PID/status, nginx's worker) and, for twinloop,
# the server's own buf_bytes and body_ref_bytes at the end of the run,
# and the server CPU-ms per GiB wrk read (the 1 MiB cell's measure: few
# of its responses finish within a run), and io_uring's carriers then
# (pipes, pipe_bytes, chunk_bytes; body_fallbacks and body_views since
# the server started); then the whole machine's, softirq's and wrk's
# CPU-µs per request (scripts/lib.sh meter_stop).
#
#   scripts/c10k-mem.sh OLD_BIN NEW_BIN   RUNS=2 DURATION=8 PORT=21600
#                                         MODES="keepalive close"
#                                         SERVERS="old new nginx" BACKENDS="epoll uring"
#                                         URL_PATH=/64k.html
#
# Hold the exclusive benchmark lock: flock -x /tmp/twinloop.lock ...
# Only the servers and wrk it started are signalled; 127.0.0.1 only.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPTS=$ROOT/scripts
# shellcheck source=lib.sh
source "$ROOT/scripts/lib.sh"
help_flag "${1:-}"
OLD=${1:?old binary}
NEW=${2:?new binary}
RUNS=${RUNS:-2}
DURATION=${DURATION:-8}
PORT_NEXT=${PORT:-21600}
URL_PATH=${URL_PATH:-/64k.html}
CONNS=${CONNS:-10000}
WRK_CPU=1
command -v wrk >/dev/null || apt_install wrk || die "apt-get install wrk failed"
raise_nofile 30000
(($(ulimit -n) > CONNS + 100)) || die "ulimit -n is $(ulimit -n); $CONNS connections need more"
lab_setup c10k
DOCROOT=$WORKDIR/www
make_docroot "$DOCROOT"
cd "$ROOT" || die "cannot cd to $ROOT"
build_wrkparse

printf 'server\tbackend\tmode\trun\treq_s\tcpu_us_per_req\tvmhwm_kib\tbuf_bytes\tbody_ref_bytes\terrors\tgib_read\tcpu_ms_per_gib\tcarriers\tmachine_cpu_us_per_req\tsoftirq_us_per_req\tclient_cpu_us_per_req\n'
for ((run = 1; run <= RUNS; run++)); do
	for mode in ${MODES:-keepalive close}; do
		for which in ${SERVERS:-old new nginx}; do
			backends=${BACKENDS:-epoll uring}
			[[ $which == nginx ]] && backends=nginx
			for backend in $backends; do
				case $which in
				old) BIN=$OLD ;;
				new) BIN=$NEW ;;
				esac
				start_server "$backend" 1 0 || continue
				pid=$SERVER_PIDS
				[[ $backend == nginx ]] && pid=${SERVER_PIDS[1]}
				run_wrk "$WORKDIR/warm.txt" "$CONNS" "$mode" "$URL_PATH" 2
				quiesce "${SERVER_PIDS[@]}"
				rm -f "$WORKDIR/mid.txt"
				if [[ $backend != nginx ]]; then
					# The counters a second before the run ends, all connections open.
					(sleep $((DURATION - 1)) && tl_counters >"$WORKDIR/mid.txt") &
					mid=$!
					BENCH_PIDS+=("$mid")
				fi
				meter_start "${SERVER_PIDS[@]}"
				run_wrk "$WORKDIR/wrk.txt" "$CONNS" "$mode" "$URL_PATH" "$DURATION"
				reqs=$(wrk_field "$WORKDIR/wrk.txt" requests) || reqs=0
				meter_stop "$reqs"
				peak=$(peak_rss_kb "$pid")
				buf=- refs=- carriers=-
				if [[ $backend != nginx ]]; then
					wait "$mid"
					forget "$mid"
					c=$(cat "$WORKDIR/mid.txt" 2>/dev/null)
					buf=$(kv "$c" buf_bytes) refs=$(kv "$c" body_ref_bytes)
					carriers="pipes=$(kv "$c" pipes),pipe_bytes=$(kv "$c" pipe_bytes),chunk_bytes=$(kv "$c" chunk_bytes),body_fallbacks=$(kv "$c" body_fallbacks),body_views=$(kv "$c" body_views)"
				fi
				stop_server
				read -r reqs rps < <(wrk_field "$WORKDIR/wrk.txt" requests rps) || { log "$which $backend $mode: wrk did not finish"; continue; }
				errs=$(wrk_field "$WORKDIR/wrk.txt" errors)
				gib=$(gib_read "$WORKDIR/wrk.txt")
				perg=$(awk -v t="$METER_TICKS" -v g="$gib" -v hz="$CLK_TCK" 'BEGIN { if (g > 0) printf "%.1f", t / hz * 1e3 / g; else print "-" }')
				printf '%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$which" "$backend" "$mode" "$run" "$rps" "$METER_CPU" "$peak" "$buf" "$refs" "$errs" "$gib" "$perg" "$carriers" \
					"$METER_MACHINE" "$METER_SOFTIRQ" "$METER_CLIENT"
			done
		done
	done
done
