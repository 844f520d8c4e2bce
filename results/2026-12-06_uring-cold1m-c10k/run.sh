#!/bin/bash
# usage: run.sh BACKEND PORT MPORT TAG [BIN]
set -u
B=$1; P=$2; MP=$3; TAG=$4; BIN=${5:-/tmp/cold-srv}
D=/tmp/coldrepro/out-$TAG; mkdir -p $D
ulimit -n 20000
cd /tmp/coldrepro
taskset -c 0 $BIN --backend=$B --loops=1 --listen=127.0.0.1:$P --metrics=127.0.0.1:$MP --dir=/tmp/coldrepro/www > $D/srv.log 2>&1 &
SP=$!
echo $SP > $D/pid
for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:$MP/livez && break; sleep 0.1; done
sync; ./evict-bin www/file >/dev/null; fincore www/file | tail -1 > $D/fincore-before
grep -E "VmHWM|VmRSS|Threads" /proc/$SP/status > $D/status-before
( for i in $(seq 24); do sleep 0.5; { date +%s.%N; grep -E "VmRSS|Threads" /proc/$SP/status | tr '\n' ' '; echo; } >> $D/samples; [ $i = 10 ] && { cat /proc/$SP/smaps_rollup > $D/smaps-mid; curl -s http://127.0.0.1:$MP/metrics > $D/metrics-mid; }; [ $i -le 4 ] && curl -s http://127.0.0.1:$MP/metrics > $D/metrics-early$i; done ) &
MON=$!
timeout 30 taskset -c 1 wrk -t1 -c10000 -d8s --timeout 10s http://127.0.0.1:$P/file > $D/wrk.txt 2>&1
wait $MON
grep -E "VmHWM|VmRSS|Threads" /proc/$SP/status > $D/status-after
cat /proc/$SP/smaps_rollup > $D/smaps-after
curl -s http://127.0.0.1:$MP/metrics > $D/metrics-after
cat /proc/$SP/stat | awk '{print "utime",$14,"stime",$15}' > $D/cpu
fincore www/file | tail -1 > $D/fincore-after
kill $SP; wait $SP 2>/dev/null
echo "== $TAG"; grep -E "requests in|Socket errors|Requests/sec|Transfer/sec" $D/wrk.txt; cat $D/status-after $D/cpu; grep -E "uring_(body|chunk|pipe)|requests_total|_total\{?.*cold" $D/metrics-after | grep -v "^#" | head -20
