#!/usr/bin/env bash
# Which sendfile calls wait on epoll's loop: perf trace of every sendfile(2) longer than
# 2 ms, system-wide, while the big cold set runs (DAMON on), for new then fix.
OUT=/tmp/trace; mkdir -p $OUT
for w in new fix; do
  perf trace -a --duration 2 -e sendfile -o $OUT/$w-sendfile.txt &
  tp=$!
  sleep 2
  BIN=/tmp/bins/$w SERVERS="epoll" SETS=big ROUNDS=3 RESULTS=$OUT/$w /work/main/scripts/cold.sh > $OUT/$w.log 2>&1
  kill -INT $tp; wait $tp
  awk -F, -v w=$w 'NR>1{printf "%s %s %s r%s p99=%s rps=%s\n",w,$1,$2,$3,$4,$5}' $OUT/$w/*/cold.csv
  echo "$w: sendfile calls over 2 ms: $(grep -c sendfile $OUT/$w-sendfile.txt), by command: $(awk '{for(i=1;i<=NF;i++) if ($i ~ /\/[0-9]+$/ || $i ~ /^[a-z]+\/[0-9]+/) {split($i,a,"/"); print a[1]; break}}' $OUT/$w-sendfile.txt | sort | uniq -c | tr '\n' ' ')"
done
