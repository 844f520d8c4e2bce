#!/usr/bin/env bash
# cold-sendfile.sh: does the epoll backend's sendfile, which blocks on the
# disk when the file is not in the page cache, need to go through the Go
# runtime (Syscall) rather than around it (RawSyscall)? A thread blocked
# in a raw call keeps its P, so a GC stop-the-world waits for the disk
# while every other loop stands still. Issue 10, item 12.
#
# It measures, on two builds of the server (the default, runtime-aware
# sendfile, and -tags sendfile_raw):
#   1. how long single sendfile calls block with a cold page cache
#      (strace -T on a burst of large files just after drop_caches);
#   2. a cold burst: 8 clients fetch 48 large files, each once, right after
#      drop_caches, while wrk asks for a small cached page on 4 other
#      connections; the burst's time, wrk's latency (p50, p99, max) and
#      the server's GC cycles;
#   3. the price of the runtime-aware call when the cache is warm: wrk on
#      a 1 MiB file, req/s and server CPU-µs per request.
# Builds are interleaved, RUNS times each. Server on CPU 0 (GOMAXPROCS=2,
# --loops 2, as the default on this 2-CPU machine), clients on CPU 1.
#
# Needs root (drop_caches), wrk, curl, strace. Usage:
#   sudo scripts/cold-sendfile.sh [OUTDIR]    (default results/cold-sendfile)
# Env: RUNS (3), FILES (48), FILE_MB (32), BENCH_PORT (19400), SERVER_GOGC
# (100, Go's default: the server allocates so little that it may run no GC
# at all during a burst; 1 makes it collect several times a second, so that
# stop-the-worlds meet blocked sendfiles).
set -uo pipefail # not -e: lib.sh's reap returns what wait says
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
help_flag "${1:-}"
bench_traps

RUNS=${RUNS:-3}
FILES=${FILES:-48}
FILE_MB=${FILE_MB:-32}
OUT=${1:-results/cold-sendfile}
PORT_NEXT=${BENCH_PORT:-19400}

[[ $(id -u) == 0 ]] || die "drop_caches needs root: run with sudo"
for t in wrk curl strace taskset; do
	command -v "$t" >/dev/null || die "$t is missing (apt-get install $t)"
done
mkdir -p "$OUT"
WORKDIR=$(mktemp -d /var/tmp/cold-sendfile.XXXXXX)
trap 'bench_cleanup; rm -rf "$WORKDIR"' EXIT

log "building both variants"
go build -o "$WORKDIR/server-runtime" ./cmd/server
go build -tags sendfile_raw -o "$WORKDIR/server-raw" ./cmd/server
export GOGC=${SERVER_GOGC:-100} # for the servers from here on

# The docroot is on the disk (mktemp under /var/tmp), not on a tmpfs:
# drop_caches must be able to evict it.
DOCROOT="$WORKDIR/www"
set +o pipefail # make_docroot's yes | head ends yes with SIGPIPE
make_docroot "$DOCROOT"
set -o pipefail
big_files "$DOCROOT" "$FILES" "$FILE_MB" f

cold() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# burst PORT: every large file once, 8 at a time; prints the seconds taken.
burst() {
	local port=$1 start end
	start=$(date +%s.%N)
	seq 0 $((FILES - 1)) | taskset -c 1 xargs -P 8 -I{} \
		curl -s -o /dev/null --max-time 60 "http://$BENCH_HOST:$port/f{}.bin"
	end=$(date +%s.%N)
	echo "$end - $start" | bc -l
}

build_wrkparse

CSV="$OUT/cold-sendfile.csv"
echo "variant,run,test,burst_s,p50_us,p99_us,max_us,rps,cpu_us_per_req,gc_cycles" >"$CSV"
mkdir -p "$OUT/raw"

# 1. How long does one sendfile block on a cold file?
log "strace -T of a cold burst"
BIN="$WORKDIR/server-runtime"
start_server epoll 2 0
cold
strace -f -T -e trace=sendfile -o "$WORKDIR/strace.txt" -p "$SERVER_PID" &
STRACE=$!
BENCH_PIDS+=("$STRACE")
sleep 1
burst "$SERVER_PORT" >/dev/null
kill -INT "$STRACE"
reap "$STRACE" 5
stop_server
grep -o '<[0-9.]*>$' "$WORKDIR/strace.txt" | tr -d '<>' | sort -g >"$WORKDIR/durations.txt"
awk '{ d[NR] = $1 * 1e6; if ($1 > 0.001) slow++ }
	END { printf "sendfile calls: %d; blocked > 1 ms: %d; p50 %.0f us, p99 %.0f us, max %.0f us\n",
		NR, slow, d[int(NR*0.5)], d[int(NR*0.99)], d[NR] }' "$WORKDIR/durations.txt" | tee "$OUT/strace-sendfile.txt"

for ((run = 1; run <= RUNS; run++)); do
	order=(runtime raw)
	((run % 2 == 0)) && order=(raw runtime)
	for v in "${order[@]}"; do
		BIN="$WORKDIR/server-$v"
		# 2. A cold burst beside small cached requests.
		start_server epoll 2 0
		curl -s -o /dev/null "http://$BENCH_HOST:$SERVER_PORT/" # index.html into the cache
		cold
		rep="$OUT/raw/$v-run$run-cold.txt"
		taskset -c 1 wrk -t1 -c4 -d8s --latency "http://$BENCH_HOST:$SERVER_PORT/" >"$rep" &
		WRK=$!
		BENCH_PIDS+=("$WRK")
		secs=$(burst "$SERVER_PORT")
		wait "$WRK"
		forget "$WRK"
		stop_server
		gc=$(grep -o 'gc_cycles=[0-9]*' "$SERVER_LOG" | tail -1 | cut -d= -f2)
		read -r p50 p99 max rps < <(wrk_field "$rep" p50_us p99_us max_us rps)
		echo "$v,$run,cold-burst,$secs,$p50,$p99,$max,$rps,,${gc:-}" >>"$CSV"
		log "$v run $run cold: burst ${secs}s, small page p50 ${p50}us p99 ${p99}us max ${max}us, gc ${gc:-?}"

		# 3. Warm: what the runtime-aware call costs per request.
		start_server epoll 2 0
		curl -s -o /dev/null "http://$BENCH_HOST:$SERVER_PORT/1m.html"
		rep="$OUT/raw/$v-run$run-warm-1m.txt"
		t0=$(cpu_ticks "$SERVER_PID")
		taskset -c 1 wrk -t1 -c8 -d5s --latency "http://$BENCH_HOST:$SERVER_PORT/1m.html" >"$rep"
		t1=$(cpu_ticks "$SERVER_PID")
		stop_server
		read -r p50 p99 max rps < <(wrk_field "$rep" p50_us p99_us max_us rps)
		reqs=$(wrk_field "$rep" requests)
		cpu=$(echo "($t1 - $t0) * 1000000 / $CLK_TCK / $reqs" | bc -l)
		printf '%s,%s,warm-1m,,%s,%s,%s,%s,%.1f,\n' "$v" "$run" "$p50" "$p99" "$max" "$rps" "$cpu" >>"$CSV"
		log "$v run $run warm 1m: $rps req/s, $(printf %.1f "$cpu") cpu-us/req"
	done
done
{
	echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ {print $2/1048576 " GiB"}' /proc/meminfo), $(uname -r), $(go version | cut -d' ' -f3)"
	echo "disk: $(df --output=source "$WORKDIR" | tail -1)"
	echo "commit: $(git rev-parse --short HEAD) ($(git status --porcelain | wc -l) files differ)"
	echo "date: $(date -u +%FT%TZ); runs $RUNS; $FILES files of $FILE_MB MiB; server GOGC=$GOGC"
} >"$OUT/env.txt"
log "done: $CSV"
