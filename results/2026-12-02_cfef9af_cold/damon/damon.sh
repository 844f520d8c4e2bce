#!/usr/bin/env bash
# Is DAMON's proactive pageout behind epoll's cold tail? epoll and io_uring on the big
# cold set, with the VM's DAMON pageout scheme on, then off, then on again; its stats
# before and after each.
K=/sys/kernel/mm/damon/admin/kdamonds/0
S=$K/contexts/0/schemes/0/stats
stat() { echo update_schemes_stats > $K/state; echo "$1 $(date +%T) sz_applied=$(cat $S/sz_applied) nr_applied=$(cat $S/nr_applied)"; }
OUT=/tmp/damon; mkdir -p $OUT
for phase in on off on2; do
  case $phase in off) echo off > $K/state ;; on2) echo on > $K/state ;; esac
  echo "state: $(cat $K/state)"
  [[ $phase != off ]] && stat "before-$phase"
  BIN=/tmp/bins/new SERVERS="epoll uring" SETS=big ROUNDS=4 RESULTS=$OUT/$phase /work/main/scripts/cold.sh > $OUT/$phase.log 2>&1
  [[ $phase != off ]] && stat "after-$phase"
done
echo "final state: $(cat $K/state)"
