#!/usr/bin/env bash
# perf record -g of a one-loop io_uring server under wrk -c10000, Connection: close.
cd /work/wt/uring-c10k
R=results/2026-12-01_uring-c10k/perf
mkdir -p $R
ulimit -n 30000
D=$(mktemp -d /tmp/uc10k-prof.XXXX); W=$D/www; mkdir -p $W
line='<p>twinloop benchmark fixture: the quick brown fox jumps over the lazy dog.</p>'
{ printf '<!doctype html>\n<title>bench</title>\n'; while :; do printf '%s\n' "$line"; done; } | head -c 1500 > $W/index.html
yes "$line" | head -c 65536 > $W/64k.html; chmod 755 $W $D; chmod 644 $W/*
port=29100
for path in /64k.html /; do
 for which in old new; do
  port=$((port+1))
  taskset -c 0 /tmp/uc10k/$which --backend=uring --loops 1 --listen 127.0.0.1:$port --dir $W 2>$R/server-$which.log &
  pid=$!
  sleep 0.5
  taskset -c 1 wrk -t1 -c10000 -d2s --timeout 10s -H 'Connection: close' http://127.0.0.1:$port$path > /dev/null 2>&1
  taskset -c 1 wrk -t1 -c10000 -d8s --timeout 10s -H 'Connection: close' http://127.0.0.1:$port$path > $R/wrk-$which-${path//\//_}.txt 2>&1 &
  w=$!
  sleep 2
  perf record -g -p $pid -o $D/perf.data -- sleep 4 2>/dev/null
  wait $w
  kill $pid; wait $pid
  perf report -i $D/perf.data --no-children --stdio --sort sym --percent-limit 1 -g none 2>/dev/null | grep -v "^$" | head -60 > $R/top-$which-${path//\//_}.txt
  perf report -i $D/perf.data --children --stdio --sort sym --percent-limit 3 -g none 2>/dev/null | grep -v "^$" | head -60 > $R/children-$which-${path//\//_}.txt
 done
done
rm -rf $D
