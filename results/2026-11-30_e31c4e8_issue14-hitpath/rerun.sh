#!/usr/bin/env bash
# Reruns this folder's measurements: BenchmarkServeHit and
# BenchmarkServePipelined16 of two commits, alternated 8 times on CPU 0,
# then scripts/ab-c50.sh (wrk -t1 -c50, keep-alive, GET / of 1500 B,
# epoll and io_uring, the two servers interleaved, 3 runs of 8 s).
#
#   flock -x /tmp/twinloop.lock results/2026-11-30_e31c4e8_issue14-hitpath/rerun.sh [BASE [NEW]]
#
# BASE defaults to 4c75bd0 (main before issue 14), NEW to e31c4e8.
set -euo pipefail
ROOT=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
BASE=${1:-4c75bd0}
NEW=${2:-e31c4e8}
export GOFLAGS=${GOFLAGS:--ldflags=-checklinkname=0}
W=$(mktemp -d /tmp/twinloop-hitpath.XXXXXX)
trap 'rm -rf "$W"' EXIT
for which in base new; do
	rev=$BASE
	[[ $which == new ]] && rev=$NEW
	mkdir -p "$W/$which"
	git -C "$ROOT" archive "$rev" | tar -x -C "$W/$which"
	(cd "$W/$which" && go test -c -o "$W/core-$which.test" ./core && go build -o "$W/server-$which" ./cmd/server)
done
cd "$W/base/core" # the test binaries run in their package directory
for i in 1 2 3 4 5 6 7 8; do
	for which in base new; do
		echo "== $which run $i"
		taskset -c 0 "$W/core-$which.test" -test.run XXX -test.bench 'ServeHit$|ServePipelined16' -test.benchmem -test.count 1 -test.benchtime 1s | grep Benchmark
	done
done
RUNS=3 DURATION=8 "$ROOT/scripts/ab-c50.sh" "$W/server-base" "$W/server-new"
