#!/usr/bin/env bash
# epoll's cold tail with DAMON's pageout on: the redesign's binary (new) against the one that
# probes each chunk again in the cold window (fix), interleaved, big set, 3 rounds each time.
OUT=/tmp/fixab; mkdir -p $OUT
echo "damon: $(cat /sys/kernel/mm/damon/admin/kdamonds/0/state)"
for i in 1 2 3; do
  for w in new fix; do
    BIN=/tmp/bins/$w SERVERS="epoll" SETS=big ROUNDS=3 RESULTS=$OUT/$w-$i /work/main/scripts/cold.sh > $OUT/$w-$i.log 2>&1
    awk -F, -v w=$w -v i=$i 'NR>1{printf "%s pass%s %s %s r%s p99=%s rps=%s\n",w,i,$1,$2,$3,$4,$5}' $OUT/$w-$i/*/cold.csv
  done
done
