#!/usr/bin/env bash
# issue 29: c=50 keep-alive CPU per request, main before the operator
# features (b55dd6f) against main after them, with no new flag and with
# three --header rules; and an A/A pair (the new binary in both slots).
set -e
cd /work/main
OUT=$1
mkdir -p "$OUT"
RUNS=5 DURATION=5 BACKENDS="epoll uring" scripts/ab-c50.sh /tmp/bins/old /tmp/bins/new >"$OUT/ab-none.tsv"
RUNS=5 DURATION=5 BACKENDS="epoll uring" scripts/ab-c50.sh /tmp/bins/new /tmp/bins/hdr >"$OUT/ab-headers.tsv"
RUNS=5 DURATION=5 BACKENDS="epoll uring" scripts/ab-c50.sh /tmp/bins/new /tmp/bins/new >"$OUT/aa.tsv"
