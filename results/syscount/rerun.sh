#!/usr/bin/env bash
# Reruns this folder's measurements for two commits (BASE: counting by hand,
# NEW: counting in the wrappers): scripts/syscalls.sh (strace -c -f beside
# the server's own counters, 2 s of wrk -t1 -c50) on epoll, io_uring and
# blocking, keep-alive and Connection: close, for both; then
# scripts/ab-c50.sh (c=50 keep-alive, GET / of 1500 B, the two servers
# interleaved, 3 runs of 5 s, server on CPU 0, wrk on CPU 1), and the same
# with Connection: close on epoll (3 runs).
#
#   flock -x /tmp/twinloop.lock results/syscount/rerun.sh [BASE [NEW]] >out.txt
#
# BASE defaults to 7cc60f9 (main before the change), NEW to HEAD.
set -euo pipefail
export GOFLAGS=${GOFLAGS:--ldflags=-checklinkname=0}
export BENCH_PORT=${BENCH_PORT:-18440} PORT=${PORT:-18470} # scripts' first ports
ROOT=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
W=$(mktemp -d /tmp/twinloop-syscount.XXXXXX)
trap 'rm -rf "$W"' EXIT
# tree NAME REV: REV's files in $W/NAME, and its server as $W/server-NAME.
tree() {
	mkdir -p "$W/$1"
	git -C "$ROOT" archive "$2" | tar -x -C "$W/$1"
	(cd "$W/$1" && go build -o "$W/server-$1" ./cmd/server)
}
BASE=${1:-7cc60f9} NEW=${2:-HEAD}
tree base "$BASE"
tree new "$NEW"
# The NEW tree's syscalls.sh for both: the base one knows no blocking
# backend and fewer counter names.
for b in epoll uring blocking; do
	for w in keepalive close; do
		for which in base new; do
			echo "=== $which ($([[ $which == base ]] && echo "$BASE" || echo "$NEW"))"
			BIN=$W/server-$which "$W/new/scripts/syscalls.sh" "$b" "$w" 2
		done
	done
	for which in base new; do
		echo "=== $which, 1 MiB bodies"
		SIZE=1m BIN=$W/server-$which "$W/new/scripts/syscalls.sh" "$b" keepalive 2
	done
done
RUNS=3 DURATION=5 BACKENDS="epoll uring blocking" "$W/new/scripts/ab-c50.sh" "$W/server-base" "$W/server-new"
printf 'binary\tbackend\trun\treq_s\tcpu_us_per_req\n'
for run in 1 2 3; do
	for which in base new; do
		port=$((18480 + run))
		taskset -c 0 "$W/server-$which" --backend=epoll --listen "127.0.0.1:$port" --dir "$ROOT/www" --loops 1 2>/dev/null &
		pid=$!
		for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
		taskset -c 1 wrk -t1 -c50 -d2s -H 'Connection: close' "http://127.0.0.1:$port/" >/dev/null
		t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
		taskset -c 1 wrk -t1 -c50 -d5s -H 'Connection: close' "http://127.0.0.1:$port/" >"$W/wrk.txt"
		t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
		kill -TERM "$pid"
		wait "$pid" || true
		reqs=$(awk '/requests in/ {print $1}' "$W/wrk.txt")
		rps=$(awk '/Requests\/sec/ {print $2}' "$W/wrk.txt")
		printf '%s\tepoll-close\t%d\t%s\t%s\n' "$which" "$run" "$rps" \
			"$(awk -v t=$((t1 - t0)) -v n="$reqs" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }')"
	done
done
