#!/usr/bin/env bash
# Issue 26's performance check: base (9eecc47) against NEW, with A/A pairs.
set -u
NEW=${1:?new bin}
OUT=${2:?out dir}
R=/work/main/scripts
mkdir -p "$OUT"
B=/tmp/bins/base B2=/tmp/bins/base2
{
date; uptime
echo "== c50 1.5KB A/B"; RUNS=5 DURATION=8 $R/ab-c50.sh $B $NEW
echo "== c50 1.5KB A/A"; RUNS=5 DURATION=8 $R/ab-c50.sh $B $B2
echo "== c10k 64k A/B"; RUNS=5 MODES=keepalive SERVERS="old new" URL_PATH=/64k.html $R/c10k-mem.sh $B $NEW
echo "== c10k 1m A/B"; RUNS=5 MODES=keepalive SERVERS="old new" URL_PATH=/1m.html $R/c10k-mem.sh $B $NEW
echo "== c10k 64k A/A"; RUNS=3 MODES=keepalive SERVERS="old new" URL_PATH=/64k.html $R/c10k-mem.sh $B $B2
date; uptime
} >"$OUT/ab.txt" 2>"$OUT/ab.err"
for which in base new base2; do
  case $which in base) bin=$B;; new) bin=$NEW;; base2) bin=$B2;; esac
  BIN=$bin SERVERS="epoll uring" ROUNDS=3 RESULTS=$OUT/cold-$which $R/cold.sh >"$OUT/cold-$which.txt" 2>&1
done
date >>"$OUT/ab.txt"
