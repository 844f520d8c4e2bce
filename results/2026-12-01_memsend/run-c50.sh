#!/usr/bin/env bash
# The c=50 runs of results/2026-12-01_memsend, in one hold of the lock.
set -u
cd /work/wt/memsend
R=/tmp/memsend-res
B=/tmp/memsend-bin
RUNS=5 DURATION=8 scripts/ab-c50.sh $B/old $B/new >$R/ab-c50-1500.tsv 2>>$R/ab-c50.err
RUNS=3 DURATION=8 URL_PATH=/64k.html scripts/ab-c50.sh $B/old $B/new >$R/ab-c50-64k.tsv 2>>$R/ab-c50.err
for k in 2 4 8 16; do
	RUNS=3 DURATION=6 EXTRA_KIB="$k" URL_PATH=/${k}k.html scripts/ab-c50.sh $B/copy64k $B/ref1k >$R/threshold-${k}k.tsv 2>>$R/ab-c50.err
done
