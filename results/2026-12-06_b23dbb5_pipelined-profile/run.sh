#!/bin/bash
# pipelined c=50 profile: server on CPU 0, wrk on CPU 1; perf on the server.
set -u
OUT=/tmp/pipeprof; mkdir -p $OUT
DOC=$OUT/www; mkdir -p $DOC; head -c 1500 /dev/urandom > $DOC/index.html
for round in 1 2 3; do
for be in epoll uring; do
  taskset -c 0 /tmp/new/server --backend=$be --loops=1 --listen 127.0.0.1:21990 --dir $DOC > /dev/null 2>$OUT/$be.err &
  P=$!
  for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:21990/index.html && break; sleep 0.1; done
  taskset -c 1 wrk -t1 -c50 -d3s -s /work/main/scripts/pipeline.lua http://127.0.0.1:21990/index.html -- 16 > /dev/null
  t0=$(awk '{print $14+$15}' /proc/$P/stat)
  taskset -c 1 wrk -t1 -c50 -d10s -s /work/main/scripts/pipeline.lua http://127.0.0.1:21990/index.html -- 16 > $OUT/$be-$round.wrk &
  W=$!
  sleep 1
  perf record -F 1999 -g -p $P -o $OUT/$be-$round.data -- sleep 6 2>/dev/null >/dev/null
  wait $W
  t1=$(awk '{print $14+$15}' /proc/$P/stat)
  kill $P; wait $P 2>/dev/null
  req=$(awk '/requests in/{print $1}' $OUT/$be-$round.wrk)
  echo "$be round=$round requests=$req server_ticks=$((t1-t0)) us_per_req=$(echo "($t1-$t0)*10000/$req" | bc -l | cut -c1-6)"
done
done
