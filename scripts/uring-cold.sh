#!/usr/bin/env bash
# uring-cold.sh: does a cold large body on io_uring hold the io-wq
# workers that warm clients need? (issue 18, item 2, last bullet)
#
# One io_uring server, one loop, on CPU 0, its reads capped by a blkio
# cgroup (v1: READ_IOPS reads/s and READ_BPS bytes/s on the root device),
# page cache dropped before each run. On CPU 1, for DUR seconds at once:
#   cold: 16 clients fetch random files of COLD_MB MiB (COLD_FILES of them)
#   warm: 4 clients fetch a cached 1 MiB file (the sendfile path)
#   hot:  4 clients fetch a cached 1.5 KB page (from memory)
# Each variant is a binary and its flags; variants are interleaved, RUNS
# rounds. Writes OUTDIR/uring-cold.csv and wrk's reports in OUTDIR/raw.
#
# Needs root (drop_caches, the cgroup), wrk, curl. Usage:
#   sudo VARIANTS="name=BIN:FLAGS ..." flock -x /tmp/twinloop.lock scripts/uring-cold.sh OUTDIR
# Env: RUNS (3), DUR (15), COLD_FILES (128), COLD_MB (16), READ_IOPS (300),
# READ_BPS (80000000), VARIANTS (default: "sendfile=bin/server:"
# "splice=bin/server:--uring-body=splice" "read=bin/server:--uring-body=read"),
# BENCH_PORT (19600).
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
help_flag "${1:-}"
bench_traps

RUNS=${RUNS:-3}
DUR=${DUR:-15}
COLD_FILES=${COLD_FILES:-128}
COLD_MB=${COLD_MB:-16}
READ_IOPS=${READ_IOPS:-300}
READ_BPS=${READ_BPS:-80000000}
VARIANTS=${VARIANTS:-"sendfile=bin/server: splice=bin/server:--uring-body=splice read=bin/server:--uring-body=read"}
OUT=${1:?usage: uring-cold.sh OUTDIR}
PORT_NEXT=${BENCH_PORT:-19600}
WRK_CPU=1

[[ $(id -u) == 0 ]] || die "drop_caches and the blkio cgroup need root"
for t in wrk curl taskset findmnt lsblk; do
	command -v "$t" >/dev/null || die "$t is missing"
done
CG=/sys/fs/cgroup/blkio/twinloop-uring-cold-$$
mkdir -p "$OUT/raw"
WORKDIR=$(mktemp -d /var/tmp/uring-cold.XXXXXX)
cleanup() {
	bench_cleanup
	rmdir "$CG" 2>/dev/null
	rm -rf "$WORKDIR"
}
trap cleanup EXIT
blkio_v1_throttle "$CG" /var/tmp "$READ_IOPS" "$READ_BPS"

# The docroot is on the disk (under /var/tmp), so drop_caches evicts it.
DOCROOT="$WORKDIR/www"
mkdir -p "$DOCROOT"
yes 'twinloop!' 2>/dev/null | head -c 1500 >"$DOCROOT/index.html"
head -c $((1 << 20)) /dev/urandom >"$DOCROOT/warm.bin"
big_files "$DOCROOT" "$COLD_FILES" "$COLD_MB" c
cat >"$WORKDIR/cold.lua" <<EOF
math.randomseed(os.time())
request = function()
	return wrk.format("GET", "/c" .. math.random(0, $COLD_FILES - 1) .. ".bin")
end
EOF
build_wrkparse

CSV="$OUT/uring-cold.csv"
echo "variant,run,client,requests,rps,p50_us,p99_us,max_us,errors,mb_per_s" >"$CSV"

wrk_bg() { # NAME CONNS PATH [LUA]
	local args=(-t1 -c"$2" -d"${DUR}s" --timeout 30s --latency)
	[[ -n ${4:-} ]] && args+=(-s "$4")
	taskset -c "$WRK_CPU" wrk "${args[@]}" "http://$BENCH_HOST:$SERVER_PORT$3" >"$REP-$1.txt" 2>&1 &
	WRKS+=($!)
	BENCH_PIDS+=($!)
}

for ((run = 1; run <= RUNS; run++)); do
	read -ra order <<<"$VARIANTS"
	((run % 2 == 0)) && order=($(printf '%s\n' "${order[@]}" | tac))
	for v in "${order[@]}"; do
		name=${v%%=*}
		spec=${v#*=}
		BIN=${spec%%:*}
		read -ra SERVER_FLAGS <<<"${spec#*:}"
		sync
		echo 3 >/proc/sys/vm/drop_caches
		start_server uring 1 0 || die "server did not start"
		echo "$SERVER_PID" >"$CG/cgroup.procs"
		for p in / /warm.bin / /warm.bin; do
			curl -s -o /dev/null --max-time 30 "http://$BENCH_HOST:$SERVER_PORT$p"
		done
		REP="$OUT/raw/$name-run$run"
		WRKS=()
		wrk_bg cold 16 /c0.bin "$WORKDIR/cold.lua"
		wrk_bg warm 4 /warm.bin
		wrk_bg hot 4 /
		for p in "${WRKS[@]}"; do
			wait "$p"
			forget "$p"
		done
		stop_server
		for c in cold warm hot; do
			read -r req rps p50 p99 mx err <<<"$(wrk_field "$REP-$c.txt" requests rps p50_us p99_us max_us errors)"
			mb=$(grep -o 'Transfer/sec: *[0-9.]*[KMG]B' "$REP-$c.txt" | awk '{v=$2; u=substr(v,length(v)-1); v=v+0; if (u=="GB") v*=1024; if (u=="KB") v/=1024; print v}')
			echo "$name,$run,$c,$req,$rps,$p50,$p99,$mx,$err,$mb" >>"$CSV"
		done
		log "$name run $run: $(grep ",$run," "$CSV" | grep "^$name," | cut -d, -f3,5,7,10 | tr '\n' ' ')"
	done
done
log "wrote $CSV"
