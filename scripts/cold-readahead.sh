#!/usr/bin/env bash
# cold-readahead.sh: does epoll's read-ahead on a helper (issue 18, epoll
# item 3, third bullet) keep a cached page fast while other clients
# download files that are not in the page cache? It compares two builds of
# the server, interleaved: BEFORE (a git revision: sendfile on the loop,
# whatever the page cache holds) and the work tree (cachestat before each
# sendfile chunk, read-ahead on a helper when it misses).
#
# Each round, per build: the server (--backend=epoll --loops 1, on CPU 0)
# is started and its small page fetched once (cached in memory), the
# server is put in a blkio cgroup that throttles reads of the docroot's
# disk (READ_BPS bytes/s, READ_IOPS reads/s), the page cache is dropped
# (echo DROP > drop_caches), then for SECONDS_RUN, on CPU 1: wrk (4 connections)
# asks for the small page, and CLIENTS curl clients download the large
# files, each file once, in a random order. Reported: the small page's
# req/s and latency (p50, p99, max), the cold bytes/s, and the server's
# counters (readaheads, cachestat, sendfile).
#
# DROP=1 drops the page cache only: the files' data is cold, their inodes
# are not, so that a miss's openat2 and fstat (on the loop, issue 18 item
# 1, not this change) do not wait for the disk; DROP=3 drops the inodes
# too, and then each miss waits on the loop behind the throttled reads.
# CHUNKS lists sendfileChunk sizes (bytes) to build the work tree with:
# 1048576 (the source's) is "after", others "after-<KiB>k".
#
# Needs root (drop_caches, the cgroup), cgroup v1 blkio, wrk, curl. Usage:
#   sudo flock -x /tmp/twinloop.lock scripts/cold-readahead.sh [OUTDIR]
# Env: BEFORE (ec5c967), RUNS (3), FILES (64), FILE_MB (16), CLIENTS (16),
# SECONDS_RUN (10), READ_BPS (83886080), READ_IOPS (300), DROP (1),
# CHUNKS (1048576), BENCH_PORT (19500).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
help_flag "${1:-}"

BEFORE=${BEFORE:-ec5c967}
RUNS=${RUNS:-3}
FILES=${FILES:-64}
FILE_MB=${FILE_MB:-16}
CLIENTS=${CLIENTS:-16}
SECONDS_RUN=${SECONDS_RUN:-10}
READ_BPS=${READ_BPS:-83886080}
READ_IOPS=${READ_IOPS:-300}
DROP=${DROP:-1}
CHUNKS=${CHUNKS:-1048576}
OUT=${1:-results/$(date +%F)_epoll-readahead}
PORT_NEXT=${BENCH_PORT:-19500}

[[ $(id -u) == 0 ]] || die "drop_caches and the blkio cgroup need root: run with sudo"
for t in wrk curl taskset shuf; do
	command -v "$t" >/dev/null || die "$t is missing (apt-get install $t)"
done
mkdir -p "$OUT/raw"
WORKDIR=$(mktemp -d /var/tmp/cold-readahead.XXXXXX) # on the disk, not a tmpfs
CG=/sys/fs/cgroup/blkio/twinloop-readahead-$$
cleanup() {
	bench_cleanup
	[[ -d $CG ]] && rmdir "$CG"
	rm -rf "$WORKDIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

blkio_v1_throttle "$CG" "$WORKDIR" "$READ_IOPS" "$READ_BPS"

log "building before ($BEFORE) and after (work tree)"
mkdir -p "$WORKDIR/src-before"
git archive "$BEFORE" | tar -x -C "$WORKDIR/src-before"
(cd "$WORKDIR/src-before" && go build -o "$WORKDIR/server-before" ./cmd/server) || die "build of $BEFORE failed"
variants=(before)
for c in $CHUNKS; do
	v=after
	((c == 1048576)) || v=after-$((c >> 10))k
	variants+=("$v")
	src="$WORKDIR/src-$v"
	mkdir -p "$src"
	git ls-files -z | grep -zv '^results/' | xargs -0 cp --parents -t "$src"
	sed -i "s/^\(\tsendfileChunk = \).*/\1$c/" "$src/backend/epoll/loop_linux.go"
	grep -q "sendfileChunk = $c\$" "$src/backend/epoll/loop_linux.go" || die "cannot set sendfileChunk"
	(cd "$src" && go build -o "$WORKDIR/server-$v" ./cmd/server) || die "build of $v failed"
done
build_wrkparse

DOCROOT="$WORKDIR/www"
set +o pipefail # make_docroot's yes | head ends yes with SIGPIPE
make_docroot "$DOCROOT"
set -o pipefail
big_files "$DOCROOT" "$FILES" "$FILE_MB" f

# cold_clients PORT OUTFILE: CLIENTS curls fetch every large file once, in
# a random order, until SECONDS_RUN have passed; each download's size goes
# to OUTFILE (what arrived, when cut at the end).
cold_clients() {
	local port=$1 out=$2 end
	end=$(($(date +%s) + SECONDS_RUN))
	shuf -i 0-$((FILES - 1)) | taskset -c 1 nice -n 19 xargs -P "$CLIENTS" -I{} bash -c \
		'left=$(('"$end"' - $(date +%s))); ((left > 0)) || exit 0
		 curl -s -o /dev/null --max-time "$left" -w "%{size_download}\n" "http://'"$BENCH_HOST:$port"'/f{}.bin"' >>"$out"
}

CSV="$OUT/cold-readahead.csv"
echo "variant,run,hot_rps,hot_p50_us,hot_p99_us,hot_max_us,cold_MBps,readaheads,readaheads_inline,cachestat,sendfile,timeouts" >"$CSV"
for ((run = 1; run <= RUNS; run++)); do
	order=("${variants[@]}")
	if ((run % 2 == 0)); then
		order=()
		for ((i = ${#variants[@]} - 1; i >= 0; i--)); do order+=("${variants[i]}"); done
	fi
	for v in "${order[@]}"; do
		BIN="$WORKDIR/server-$v"
		start_server epoll 1 0
		curl -s -o /dev/null "http://$BENCH_HOST:$SERVER_PORT/"
		echo "$SERVER_PID" >"$CG/cgroup.procs"
		sync
		echo "$DROP" >/proc/sys/vm/drop_caches
		rep="$OUT/raw/$v-run$run-wrk.txt"
		sizes="$WORKDIR/sizes-$v-$run.txt"
		: >"$sizes"
		taskset -c 1 wrk -t1 -c4 -d"${SECONDS_RUN}s" --latency "http://$BENCH_HOST:$SERVER_PORT/" >"$rep" &
		WRK=$!
		BENCH_PIDS+=("$WRK")
		t0=$(date +%s.%N)
		cold_clients "$SERVER_PORT" "$sizes"
		t1=$(date +%s.%N)
		wait "$WRK"
		forget "$WRK"
		sleep 0.3 # one --stats line after the last response
		counters=$(tl_counters)
		stop_server
		echo "$counters" >"$OUT/raw/$v-run$run-stats.txt"
		read -r p50 p99 max rps < <(wrk_field "$rep" p50_us p99_us max_us rps)
		mbps=$(awk -v s="$t0" -v e="$t1" '{ b += $1 } END { printf "%.1f", b / 1048576 / (e - s) }' "$sizes")
		ra=$(kv "$counters" readaheads)
		rai=$(kv "$counters" readaheads_inline)
		cs=$(kv "$counters" cachestat)
		sf=$(kv "$counters" sendfile)
		to=$(kv "$counters" timeouts)
		echo "$v,$run,$rps,$p50,$p99,$max,$mbps,$ra,$rai,$cs,$sf,$to" >>"$CSV"
		log "$v run $run: hot page $rps req/s, p50 ${p50}us p99 ${p99}us max ${max}us; cold ${mbps} MiB/s; readaheads $ra (inline $rai), cachestat $cs, sendfile $sf"
	done
done
{
	env_header
	echo "disk: $(findmnt -no SOURCE --target "$WORKDIR") ($DEV), read_ahead_kb $(cat "/sys/dev/block/$DEV/queue/read_ahead_kb" 2>/dev/null)"
	echo "drop_caches: $DROP; chunks: $CHUNKS"
	echo "throttle: $READ_BPS bytes/s, $READ_IOPS reads/s (blkio v1)"
	echo "before: $(git rev-parse "$BEFORE"); runs $RUNS; $FILES files of $FILE_MB MiB; $CLIENTS cold clients; ${SECONDS_RUN}s"
} >"$OUT/env.txt"
log "done: $CSV"
