#!/bin/bash
# Which system calls the blocking backend makes per Connection: close
# request, by name: strace -c -f on the server for 1 s of wrk -c50.
#   flock -x /tmp/twinloop.lock results/blocking-accept/strace.sh OUT_PREFIX
# (BIN defaults to ./bin/server; run from the repository's root.)
set -u
out=${1:?usage: strace.sh OUT_PREFIX}
BIN=${BIN:-./bin/server} PORT=${PORT:-22030}
. scripts/lib.sh
www=$(mktemp -d) && make_docroot "$www"
taskset -c 0 "$BIN" --backend=blocking --loops 1 --listen 127.0.0.1:$PORT --dir "$www" 2>/dev/null &
pid=$!
sleep 0.5
strace -c -f -o "$out-strace.txt" -p $pid &
sp=$!
sleep 0.5
taskset -c 1 wrk -t1 -c50 -d1s -H 'Connection: close' http://127.0.0.1:$PORT/ >"$out-wrk.txt"
sleep 0.2
kill -INT $sp; wait $sp
kill $pid; wait $pid
rm -rf "$www"
