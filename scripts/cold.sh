#!/usr/bin/env bash
# cold.sh is the disk-bound workload (issue 18): files that come from a
# throttled disk, not from the page cache, beside one cached page, and
# what a one-loop server does to the cached page meanwhile. Into
# results/YYYY-MM-DD_<commit>_cold[_quick]/.
#
#   scripts/cold.sh [--quick]       (make cold, make cold QUICK=1)
#
# Servers, each with one loop or worker pinned to CPU 0: twinloop epoll
# and io_uring (--loops 1), nginx 1.22 with sendfile on, and nginx with
# `aio threads` (its default thread pool: 32 threads, max_queue 65536)
# beside sendfile; every one serves the same docroot.
#
# Cold sets, generated once (random bytes) under COLD_DIR and reused:
#   big    128 files of 16 MiB (2 GiB)
#   small  20,000 files of 16 KiB (312 MiB)
# COLD_DIR must be on a real block device (not tmpfs or overlay): the
# throttle works on one.
#
# Each cell (server, set, round): sync and drop the page cache; start the
# server; move it into a cgroup whose reads from the cold set's disk are
# capped at THROTTLE_IOPS reads/s and THROTTLE_BPS bytes/s (cgroup v1
# blkio.throttle.read_iops_device / read_bps_device, or v2 io.max); warm
# only the cached page (index.html, 1500 B, asked as /); then, at once,
# both on CPU 1 and both for DURATION seconds:
#   wrk -c16 -s scripts/cold.lua   random files of the set, no repeats
#   wrk -c4                         the cached page
# Measured: the cached page's p99 and req/s, the cold set's MB/s and
# files/s (exact, from cold.lua's done()), the server's CPU time over the
# run (utime+stime, nginx's master and worker summed) and per request,
# and the whole machine's, softirq's and the two wrks' CPU-µs per request
# (scripts/lib.sh meter_stop; cold.csv's last three columns).
# Rounds are interleaved, the servers' order rotating each round.
#
# Before the cells it times a cold read inside the cgroup and outside it
# (throttle.txt) and stops if the throttle does not hold.
#
# Environment: QUICK=1 (as --quick: 1 round of 6 s), ROUNDS (3),
# DURATION (15 s), SERVERS ("epoll uring nginx nginx-aio"), SETS
# ("big small"), COLD_DIR (/var/tmp/twinloop-cold), THROTTLE_IOPS (300),
# THROTTLE_BPS (80000000), BIN (a server binary instead of building
# ./cmd/server), BENCH_PORT (first port tried, 18080), RESULTS.
# A full run takes about 7 minutes (24 cells of ~17 s; 6 min 47 s here),
# plus about 20 s to generate the sets the first time; QUICK=1 about 1.5.
# The small set's files/s rises during a run, as the directory's and the
# inode table's blocks come into the cache: compare runs of one DURATION.
#
# Needs root (drop_caches, cgroups). Only 127.0.0.1 is used, and only
# processes this script started are ever signalled.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPTS=$ROOT/scripts
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"

quick_args "$@"
if ((QUICK)); then
	ROUNDS=${ROUNDS:-1} DURATION=${DURATION:-6}
else
	ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-15}
fi
read -ra SERVERS <<<"${SERVERS:-epoll uring nginx nginx-aio}"
read -ra SETS <<<"${SETS:-big small}"
COLD_DIR=${COLD_DIR:-/var/tmp/twinloop-cold}
THROTTLE_IOPS=${THROTTLE_IOPS:-300}
THROTTLE_BPS=${THROTTLE_BPS:-80000000}
HOT_CONNS=4 COLD_CONNS=16
SERVER_CPU=0 WRK_CPU=1
START=$(date +%s)
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)

((EUID == 0)) || die "run as root: the page cache is dropped and cgroups are made"
(($(nproc) >= 2)) || die "needs 2 CPUs: the server on CPU 0, wrk on CPU 1"

# --- tools ----------------------------------------------------------------
need wrk nginx curl taskset:util-linux findmnt:util-linux pgrep:procps bc
nginx -V 2>&1 | grep -q -- --with-threads || die "this nginx has no thread pools (--with-threads): nginx-aio cannot run"
# twinloop keeps up to --cache-entries (4096) files open per loop.
raise_nofile 16384

# --- the cold sets ----------------------------------------------------------
# set_files SET: how many files, of how many bytes.
set_files() {
	case $1 in
	big) echo "128 16777216" ;;
	small) echo "20000 16384" ;;
	*) die "unknown set $1 (big or small)" ;;
	esac
}

# make_sets: COLD_DIR/www holds the fixture pages (make_docroot) and the
# sets as big/00000 .. and small/00000 ..; made once, marked complete by
# .complete, so an interrupted generation starts over.
make_sets() {
	local www=$COLD_DIR/www s n size
	if [[ -f $COLD_DIR/.complete ]]; then
		log "cold sets: reusing $COLD_DIR ($(<"$COLD_DIR/.complete"))"
		return 0
	fi
	log "cold sets: generating into $COLD_DIR (2.3 GiB of random bytes)"
	rm -rf "$www"
	make_docroot "$www"
	for s in big small; do
		read -r n size < <(set_files "$s")
		mkdir -p "$www/$s"
		# One stream of random bytes cut into files: split names them
		# 00000, 00001, ... (cold.lua's names).
		head -c $((n * size)) /dev/urandom | split -b "$size" -a 5 -d - "$www/$s/" ||
			die "generating the $s set failed"
	done
	chmod 0755 "$COLD_DIR" "$www" "$www/big" "$www/small"
	find "$www/big" "$www/small" -type f -exec chmod 0644 {} +
	sync
	echo "big: 128 x 16 MiB, small: 20000 x 16 KiB, made $(date -Is)" >"$COLD_DIR/.complete"
}

# block_device DIR: the MAJ:MIN the throttle must name for reads of DIR's
# files: the whole disk for a partition, the device itself for a disk or
# device-mapper volume. Dies on tmpfs, overlay and the like.
block_device() {
	local mm fstype src
	read -r mm fstype src < <(findmnt -no MAJ:MIN,FSTYPE,SOURCE -T "$1")
	[[ -e /sys/dev/block/$mm ]] ||
		die "$1 is on $src ($fstype, $mm), not a block device: set COLD_DIR to a directory on a disk (see df)"
	if [[ -e /sys/dev/block/$mm/partition ]]; then
		mm=$(<"/sys/dev/block/$mm/../dev")
	fi
	echo "$mm"
}

# --- the throttle -----------------------------------------------------------
# cg_make: a cgroup capping reads from DEV; CG_PROCS is where a PID goes.
CG='' CG_PROCS=''
cg_make() {
	local v1=/sys/fs/cgroup/blkio v2=/sys/fs/cgroup
	if [[ -e $v1/blkio.throttle.read_iops_device ]]; then
		CG_KIND="cgroup v1 blkio"
		CG=$v1/twinloop-cold-$$
		mkdir "$CG" || die "mkdir $CG failed"
		echo "$DEV $THROTTLE_IOPS" >"$CG/blkio.throttle.read_iops_device" &&
			echo "$DEV $THROTTLE_BPS" >"$CG/blkio.throttle.read_bps_device" ||
			die "cannot set the blkio throttle on $DEV"
		CG_SETTING="blkio.throttle.read_iops_device $(<"$CG/blkio.throttle.read_iops_device"); read_bps_device $(<"$CG/blkio.throttle.read_bps_device")"
	elif grep -qw io "$v2/cgroup.controllers" 2>/dev/null; then
		CG_KIND="cgroup v2 io.max"
		grep -qw io "$v2/cgroup.subtree_control" || echo +io >"$v2/cgroup.subtree_control" ||
			die "cannot enable the io controller in $v2/cgroup.subtree_control"
		CG=$v2/twinloop-cold-$$
		mkdir "$CG" || die "mkdir $CG failed"
		echo "$DEV riops=$THROTTLE_IOPS rbps=$THROTTLE_BPS" >"$CG/io.max" || die "cannot set io.max on $DEV"
		CG_SETTING="io.max $(<"$CG/io.max")"
	else
		die "no blkio (cgroup v1) or io (cgroup v2) controller: cannot throttle the disk"
	fi
	CG_PROCS=$CG/cgroup.procs
}

cg_remove() {
	[[ -n $CG && -d $CG ]] && rmdir "$CG" 2>/dev/null
}

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# in_cg CMD...: runs CMD inside the throttled cgroup.
in_cg() {
	sh -c 'echo $$ >"$0" && exec "$@"' "$CG_PROCS" "$@"
}

# timed CMD...: the seconds CMD took.
timed() {
	local t0 t1
	t0=$(date +%s%N)
	"$@" >/dev/null 2>&1
	t1=$(date +%s%N)
	echo "scale=3; ($t1 - $t0) / 1000000000" | bc
}

# verify_throttle: reads 4 big files (64 MiB) and 300 small ones cold,
# outside the cgroup and inside it. Inside, the big read must take at
# least 90% of 64 MiB / THROTTLE_BPS and the small one 90% of
# 300 / THROTTLE_IOPS (one read per file at the very least).
verify_throttle() {
	local www=$COLD_DIR/www big=() small=() i tb tbc ts tsc minb mins
	for i in 0 1 2 3; do big+=("$www/big/$(printf %05d $((124 + i)))"); done
	for ((i = 19700; i < 20000; i++)); do small+=("$www/small/$(printf %05d "$i")"); done
	drop_caches
	tb=$(timed cat "${big[@]}")
	ts=$(timed cat "${small[@]}")
	drop_caches
	tbc=$(timed in_cg cat "${big[@]}")
	tsc=$(timed in_cg cat "${small[@]}")
	minb=$(echo "scale=3; 0.9 * 67108864 / $THROTTLE_BPS" | bc)
	mins=$(echo "scale=3; 0.9 * 300 / $THROTTLE_IOPS" | bc)
	{
		echo "throttle: $CG_KIND on $DEV ($DEV_NAME), $CG_SETTING"
		echo "cold read of 4 x 16 MiB: ${tb}s unthrottled, ${tbc}s in the cgroup (at least ${minb}s expected)"
		echo "cold read of 300 x 16 KiB: ${ts}s unthrottled, ${tsc}s in the cgroup (at least ${mins}s expected)"
	} | tee "$OUT/throttle.txt" >&2
	if (($(echo "$tbc < $minb || $tsc < $mins" | bc))); then
		echo "verdict: the throttle does not hold" >>"$OUT/throttle.txt"
		die "the throttle does not hold (see $OUT/throttle.txt): is $DEV the device under $COLD_DIR?"
	fi
	echo "verdict: the throttle holds" >>"$OUT/throttle.txt"
}

# --- build ----------------------------------------------------------------
lab_setup cold
trap 'lab_exit; cg_remove' EXIT

cd "$ROOT" || die "cannot cd to $ROOT"
build_server
PLOT=$WORKDIR/plot
go build -o "$PLOT" ./scripts/plot || die "go build ./scripts/plot failed"
build_wrkparse

# The servers' binaries and the libraries nginx links (cell reads them).
mapfile -t PROGRAMS < <({
	echo "$BIN"
	command -v nginx
	ldd "$(command -v nginx)" | awk '$3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
} | sort -u)

mkdir -p "$COLD_DIR" || die "cannot make $COLD_DIR"
DEV=$(block_device "$COLD_DIR") || exit 1
DEV_NAME=$(basename "$(readlink -f "/sys/dev/block/$DEV")")
make_sets
DOCROOT=$COLD_DIR/www

# --- results folder -------------------------------------------------------
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo nocommit)
RUN_NAME="$(date +%F)_${COMMIT}_cold"
((QUICK)) && RUN_NAME+=_quick
RESULTS=${RESULTS:-$ROOT/results}
results_dir "$RUN_NAME"
CSV=$OUT/cold.csv
"$WRKPARSE" header cold >"$CSV"
log "results go to $OUT"

cg_make
verify_throttle

ncells=$((ROUNDS * ${#SETS[@]} * ${#SERVERS[@]}))
{
	env_header
	echo "server binary: $BIN$([[ $BIN == "$ROOT/bin/server" ]] && echo ", built from the work tree")"
	echo "quick: $QUICK"
	echo "nginx: $(nginx -v 2>&1 | sed 's/^nginx version: //')"
	echo "wrk: $(wrk -v 2>&1 | head -1 | awk '{ print $2 }')"
	echo "load average at start (1, 5, 15 min): $LOADAVG"
	echo "placement: server CPU $SERVER_CPU (one loop or worker), both wrk -t1 on CPU $WRK_CPU"
	echo "cold sets: $COLD_DIR on $(findmnt -no SOURCE,FSTYPE -T "$COLD_DIR" | tr -s ' ') ($DEV_NAME, $DEV)"
	echo "throttle: $CG_KIND, $CG_SETTING (throttle.txt: verified)"
	echo "load: $COLD_CONNS connections on the cold set (scripts/cold.lua, no repeats), $HOT_CONNS on / (1500 B, warmed), at once, ${DURATION}s"
	echo "rounds: $ROUNDS, servers ${SERVERS[*]}, sets ${SETS[*]}: $ncells cells"
	echo "ulimit -n: $(ulimit -n)"
} >"$OUT/env.txt"

# --- cells ----------------------------------------------------------------
# ms US: whole µs as ms, empty stays empty (wrk had no sample).
ms() { [[ -z $1 ]] || div "$1" 1000 %.2f; }

# cell SERVER SET ROUND: one measured run, one CSV row.
cell() {
	local srv=$1 set=$2 round=$3 kind n size tag hot cold p i pids=() rc=0
	local hot_p99 hot_p50 hot_rps hot_err hot_non2xx cold_line url cpu_s reqs
	read -r n size < <(set_files "$set")
	tag="$srv-$set-round$round"
	hot=$OUT/raw/$tag-hot.txt cold=$OUT/raw/$tag-cold.txt
	drop_caches
	# The servers' own code back into the page cache, outside the cgroup:
	# a page of their text faulted in while throttled would be a disk read
	# the cold set did not ask for.
	cat "${PROGRAMS[@]}" >/dev/null 2>&1
	kind=$srv NGINX_HTTP_EXTRA=
	if [[ $srv == nginx-aio ]]; then
		kind=nginx
		NGINX_HTTP_EXTRA='aio threads;'
	fi
	start_server "$kind" 1 "$SERVER_CPU" || {
		log "$tag: server did not start; cell skipped"
		return 1
	}
	for p in "${SERVER_PIDS[@]}"; do
		echo "$p" >"$CG_PROCS" || die "cannot move pid $p into $CG"
	done
	url=http://$BENCH_HOST:$SERVER_PORT
	for i in 1 2 3; do
		curl -sf -o /dev/null "$url/" || {
			log "$tag: the cached page does not answer; cell skipped"
			stop_server
			return 1
		}
	done
	child_ticks
	local c0=$CHILD_TICKS
	meter_start "${SERVER_PIDS[@]}"
	taskset -c "$WRK_CPU" wrk -t1 -c"$HOT_CONNS" -d"${DURATION}s" --timeout 10s --latency "$url/" >"$hot" 2>&1 &
	pids+=($!)
	taskset -c "$WRK_CPU" wrk -t1 -c"$COLD_CONNS" -d"${DURATION}s" --timeout 30s -s "$SCRIPTS/cold.lua" \
		"$url/" -- "/$set/" "$n" "$RANDOM$round" >"$cold" 2>&1 &
	pids+=($!)
	BENCH_PIDS+=("${pids[@]}")
	for p in "${pids[@]}"; do
		wait "$p" || rc=1
		forget "$p"
	done
	quiesce "${SERVER_PIDS[@]}"
	child_ticks
	read -r hot_rps hot_err hot_non2xx < <(wrk_field "$hot" rps errors non2xx) || hot_rps=''
	hot_p99=$(wrk_field "$hot" p99_us) hot_p50=$(wrk_field "$hot" p50_us)
	cold_line=$(grep -m1 '^cold: ' "$cold" | sed 's/^cold: //')
	reqs=$(($(wrk_field "$hot" requests || echo 0) + $(kv "$cold_line" requests)))
	meter_stop "$reqs"
	# The two wrks' CPU (meter_stop took CLIENT_TICKS for run_client's one).
	METER_CLIENT=$(ticks_per_req $((CHILD_TICKS - c0)) "$reqs" %.2f)
	stop_server
	((rc == 0)) || log "$tag: a wrk failed (its report is in raw/)"
	cpu_s=$(div "$((METER_TICKS * 1000000 / CLK_TCK))" 1000000 %.2f)
	"$WRKPARSE" row cold - server="$srv" set="$set" round="$round" \
		hot_p99_ms="$(ms "$hot_p99")" hot_rps="$hot_rps" \
		cold_MBps="$(div "$(kv "$cold_line" bytes)" "$(kv "$cold_line" seconds)e6" %.1f)" \
		cold_files_per_s="$(div "$(kv "$cold_line" requests)" "$(kv "$cold_line" seconds)" %.1f)" \
		cpu_s="$cpu_s" cpu_us_per_req="$(div "$((METER_TICKS * 1000000 / CLK_TCK))" "$reqs" %.1f)" \
		machine_cpu_us_per_req="$METER_MACHINE" softirq_us_per_req="$METER_SOFTIRQ" client_cpu_us_per_req="$METER_CLIENT" \
		hot_p50_ms="$(ms "$hot_p50")" hot_errors="${hot_err:-}" hot_non2xx="${hot_non2xx:-}" \
		cold_errors="$(kv "$cold_line" errors)" cold_non2xx="$(kv "$cold_line" status)" >>"$CSV"
	log "$tag: hot page p99 $(ms "$hot_p99") ms, $hot_rps req/s; cold $(tail -1 "$CSV" | cut -d, -f6) MB/s, $(tail -1 "$CSV" | cut -d, -f7) files/s; CPU ${cpu_s}s"
	[[ $kind == nginx ]] || echo "$tag: $(grep -m1 '^server: stopped' "$SERVER_LOG")" >>"$OUT/raw/servers.txt"
}

log "$ncells cells of ~$((DURATION + 2))s: about $(((ncells * (DURATION + 2) + 59) / 60)) min"
for ((r = 1; r <= ROUNDS; r++)); do
	for set in "${SETS[@]}"; do
		# Rotate the order each round, so that no server always runs first.
		for ((i = 0; i < ${#SERVERS[@]}; i++)); do
			cell "${SERVERS[$(((i + r - 1) % ${#SERVERS[@]}))]}" "$set" "$r"
		done
	done
done

echo "elapsed: $(($(date +%s) - START))s" >>"$OUT/env.txt"
DONE=1
log "plot and summary.md"
"$PLOT" -cold -dir "$OUT" || log "plot failed"
log "done in $((($(date +%s) - START) / 60))m$((($(date +%s) - START) % 60))s: $OUT"
