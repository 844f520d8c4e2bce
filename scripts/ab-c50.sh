#!/usr/bin/env bash
# ab-c50.sh compares two server binaries on the keep-alive hit path:
# wrk -t1 -c50 on GET / (1500 bytes from memory; URL_PATH=/1m.html for a
# body sent from the file), each backend, the two
# binaries interleaved run by run, the server (--loops 1) on CPU 0 and wrk
# on CPU 1. It prints one line per run: binary, backend, req/s, server
# CPU-µs per request (utime+stime from /proc), the whole machine's busy
# CPU-µs per request (both CPUs, softirq included), and the syscalls per
# request from the server's own exit summary; then softirq's and wrk's
# CPU-µs per request (scripts/lib.sh meter_stop).
#
#   scripts/ab-c50.sh OLD_BIN NEW_BIN    RUNS=3 DURATION=8 PORT=21500
#                                        BACKENDS="epoll uring" (blocking too)
#                                        URL_PATH=/ (/64k.html, /1m.html)
#                                        FLAGS= (server flags for both, e.g. --uring-body=read)
#                                        EXTRA_KIB= (more pages, e.g. "4 16": /4k.html, /16k.html)
#                                        SETTLE=0 (seconds to wait after each server exits)
#
# Hold the exclusive benchmark lock: flock -x /tmp/twinloop.lock ...
# Only the servers it started are signalled; 127.0.0.1 only.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib.sh
source "$ROOT/scripts/lib.sh"
OLD=${1:?old binary}
NEW=${2:?new binary}
RUNS=${RUNS:-3}
DURATION=${DURATION:-8}
PORT_NEXT=${PORT:-21500}
WRK_CPU=1
URL_PATH=${URL_PATH:-/}
read -ra FLAGS <<<"${FLAGS:-}"
command -v wrk >/dev/null || apt_install wrk || die "apt-get install wrk failed"
WORK=$(mktemp -d /tmp/twinloop-ab.XXXXXX)
bench_traps
trap 'bench_cleanup; rm -rf "$WORK"' EXIT
make_docroot "$WORK/www"
for k in ${EXTRA_KIB:-}; do
	head -c $((k * 1024)) "$WORK/www/1m.html" >"$WORK/www/${k}k.html"
done
cd "$ROOT" || die "cannot cd to $ROOT"
WORKDIR=$WORK build_wrkparse
printf 'binary\tbackend\trun\treq_s\tcpu_us_per_req\tsyscalls_per_req\tmachine_cpu_us_per_req\tsoftirq_us_per_req\tclient_cpu_us_per_req\n'
for ((run = 1; run <= RUNS; run++)); do
	for backend in ${BACKENDS:-epoll uring}; do
		for which in old new; do
			bin=$OLD
			[[ $which == new ]] && bin=$NEW
			port=$(next_port)
			taskset -c 0 "$bin" --backend="$backend" --listen "127.0.0.1:$port" --dir "$WORK/www" --loops 1 "${FLAGS[@]}" 2>"$WORK/err" &
			pid=$!
			BENCH_PIDS+=("$pid")
			wait_listening "$pid" "$port" || { reap "$pid" 5; log "$backend did not start: $(tail -1 "$WORK/err")"; continue; }
			taskset -c 1 wrk -t1 -c50 -d2s "http://127.0.0.1:$port$URL_PATH" >/dev/null # warm-up
			quiesce "$pid"
			meter_start "$pid"
			run_client "$WORK/wrk.txt" wrk -t1 -c50 -d"${DURATION}s" "http://127.0.0.1:$port$URL_PATH"
			reqs=$(wrk_field "$WORK/wrk.txt" requests) || reqs=0
			meter_stop "$reqs"
			kill -TERM "$pid"
			reap "$pid" 10
			sleep "${SETTLE:-0}"
			read -r reqs rps < <(wrk_field "$WORK/wrk.txt" requests rps) || { log "$backend: wrk did not finish"; continue; }
			sys=$(grep -o 'syscalls_per_req=[0-9.]*' "$WORK/err" | cut -d= -f2)
			printf '%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n' "$which" "$backend" "$run" "$rps" "$METER_CPU" "${sys:--}" \
				"$METER_MACHINE" "$METER_SOFTIRQ" "$METER_CLIENT"
		done
	done
done
