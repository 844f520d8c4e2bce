#!/usr/bin/env bash
# The body path by size: memory (--sendfile=never) against the file (--sendfile=always),
# both backends, c=50 keep-alive, interleaved by ab-c50.sh. Open question (b) of issue 27.
OUT=${1:?out}
mkdir -p "$OUT"
for k in 4 8 16 32 64 256; do
  echo "== ${k}k"
  RUNS=3 DURATION=5 EXTRA_KIB="4 8 16 32 256" URL_PATH=/${k}k.html /work/main/scripts/ab-c50.sh /tmp/bins/mem /tmp/bins/sf
done >"$OUT/sizes.txt" 2>"$OUT/sizes.err"
