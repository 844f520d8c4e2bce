#!/usr/bin/env bash
# bodies.sh: how io_uring sends file bodies, against epoll, in one
# interleaved run (issue 9; backend/uring/doc.go quotes it).
#
#   scripts/bodies.sh            (under: flock -x /tmp/twinloop.lock)
#
# Part 1, wrk: ROUNDS rounds; in each, for each size (1m, 64k, 1500) and
# each server, a fresh one-loop server on CPU 0, a 1 s warm-up, then one
# DURATION-second wrk -t1 -c50 keep-alive run on CPU 1. Servers: epoll,
# uring (sendfile), uring --uring-body=splice, uring --uring-body=read (1m
# only: the path a cold part takes), and with BASE=<commit> that commit's two uring
# servers too (uring-base, uring-read-base).
# Per run: req/s, server CPU-µs per request (utime+stime from /proc), the
# loops' syscalls per request (their counters), the io_uring worker
# threads (iou-wrk-*) when the run ends, and the whole machine's,
# softirq's and wrk's CPU-µs per request (scripts/lib.sh meter_stop).
#
# Part 2, stall (scripts/stall): per server on --loops 1 (default
# timeouts), fresh downloads of 200 KB and 4 MiB files timed on an idle
# server and then while STALLED clients (300) each wait for the 4 MiB file
# through a 4 KiB receive buffer without reading; and the io_uring worker
# threads meanwhile.
#
# Results: results/DATE_COMMIT_bodies/: env.txt, summary.csv (a row per
# wrk run), stall.txt, summary.md (medians), raw/ (wrk reports, server
# exit lines). Environment: ROUNDS (3), DURATION (3), STALLED (300), BASE,
# SIZES ("1m 64k 1500"), STALL (1; 0 skips part 2), BENCH_PORT (18300).
# Loopback only; only processes it started are signalled.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPTS=$ROOT/scripts
BENCH_PORT=${BENCH_PORT:-18300}
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"
bench_traps

ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-3} STALLED=${STALLED:-300} WARMUP=1
SIZES_SET=${SIZES:-}
read -ra SIZES <<<"${SIZES:-1m 64k 1500}"
STALL=${STALL:-1}
SERVER_CPU=0 WRK_CPU=1
command -v wrk >/dev/null || apt_install wrk || die "apt-get install wrk failed"
raise_nofile 8192

WORKDIR=$(mktemp -d /tmp/twinloop-bodies.XXXXXX)
trap 'bench_cleanup; rm -rf "$WORKDIR"' EXIT
DOCROOT=$WORKDIR/www
make_docroot "$DOCROOT"
head -c 204800 /dev/urandom >"$DOCROOT/200k.bin"
head -c 4194304 /dev/urandom >"$DOCROOT/4m.bin"
chmod 0644 "$DOCROOT"/*.bin

log "building"
cd "$ROOT" || die "cannot cd to $ROOT"
go build -o "$WORKDIR/server" ./cmd/server && go build -o "$WORKDIR/stall" ./scripts/stall || die "build failed"
build_wrkparse
SERVERS=("epoll:$WORKDIR/server:" "uring:$WORKDIR/server:" "uring-splice:$WORKDIR/server:--uring-body=splice" "uring-read:$WORKDIR/server:--uring-body=read")
if [[ -n ${BASE:-} ]]; then
	git -C "$ROOT" worktree add -q --detach "$WORKDIR/base" "$BASE" || die "cannot check out BASE=$BASE"
	(cd "$WORKDIR/base" && go build -o "$WORKDIR/server-base" ./cmd/server) || die "BASE=$BASE does not build"
	git -C "$ROOT" worktree remove --force "$WORKDIR/base"
	SERVERS+=("uring-base:$WORKDIR/server-base:" "uring-read-base:$WORKDIR/server-base:--uring-body=read")
fi

COMMIT=$(git -C "$ROOT" rev-parse --short HEAD)
OUT=$ROOT/results/$(date +%F)_${COMMIT}_bodies
n=2
while [[ -e $OUT ]]; do OUT=$ROOT/results/$(date +%F)_${COMMIT}_bodies-$n; n=$((n + 1)); done
mkdir -p "$OUT/raw"
CSV=$OUT/summary.csv
echo 'server,size,round,rps,cpu_us_per_req,syscalls_per_req,iou_wrk,machine_cpu_us_per_req,softirq_us_per_req,client_cpu_us_per_req' >"$CSV"
{
	env_header
	echo "base: ${BASE:-none}"
	echo "wrk: $(wrk -v 2>&1 | head -1 | awk '{ print $2 }')"
	loadavg start
	echo "fs.pipe-user-pages-soft/hard, pipe-max-size: $(cat /proc/sys/fs/pipe-user-pages-soft) $(cat /proc/sys/fs/pipe-user-pages-hard) $(cat /proc/sys/fs/pipe-max-size); user $(id -un)"
	echo "placement: server --loops 1 on CPU $SERVER_CPU, wrk -t1 -c50 keep-alive on CPU $WRK_CPU"
	echo "runs: $ROUNDS rounds, each: per size (${SIZES[*]}), per server, fresh server, ${WARMUP}s warm-up, one ${DURATION}s run"
	((STALL)) && echo "stall: $STALLED clients that do not read, --loops 1, default timeouts"
} >"$OUT/env.txt"

# workers PID: the process's io_uring worker threads.
workers() { cat /proc/"$1"/task/*/comm 2>/dev/null | grep -c '^iou-wrk' || true; }

run_one() { # server-spec size round
	local name bin flags size=$2 round=$3 path raw req before after spr wrk_n
	IFS=: read -r name bin flags <<<"$1"
	path=$(url_path "$size")
	BIN=$bin
	read -ra SERVER_FLAGS <<<"$flags"
	start_server "${name%%-*}" 1 "$SERVER_CPU" || return 1
	run_wrk "$WORKDIR/warmup.txt" 50 keepalive "$path" "$WARMUP"
	quiesce "$SERVER_PID"
	before=$(tl_settle "$(wrk_field "$WORKDIR/warmup.txt" requests)")
	raw=$OUT/raw/$name-$size-round$round.txt
	meter_start "$SERVER_PID"
	run_wrk "$raw" 50 keepalive "$path" "$DURATION"
	wrk_n=$(workers "$SERVER_PID")
	req=$(wrk_field "$raw" requests) || req=0
	quiesce "$SERVER_PID"
	meter_stop "$req" %.1f
	after=$(tl_settle "$(($(kv "$before" requests) + req))")
	spr=$(div "$(($(kv "$after" syscalls) - $(kv "$before" syscalls)))" "$(($(kv "$after" requests) - $(kv "$before" requests)))")
	echo "$name,$size,$round,$(wrk_field "$raw" rps),$METER_CPU,$spr,$wrk_n,$METER_MACHINE,$METER_SOFTIRQ,$METER_CLIENT" >>"$CSV"
	log "$name $size round $round: $(wrk_field "$raw" rps) req/s, CPU-µs/req $METER_CPU server, $METER_MACHINE machine, $spr syscalls/req, $wrk_n iou-wrk"
	stop_server
	echo "$name $size round $round: $(grep -m1 '^server: stopped' "$SERVER_LOG")" >>"$OUT/raw/servers.txt"
}

for ((r = 1; r <= ROUNDS; r++)); do
	for size in "${SIZES[@]}"; do
		for spec in "${SERVERS[@]}"; do
			[[ $spec == uring-read* && $size != 1m ]] && continue
			run_one "$spec" "$size" "$r"
		done
	done
done

((STALL)) && log "stall: $STALLED clients that do not read"
for spec in "${SERVERS[@]}"; do
	((STALL)) || break
	IFS=: read -r name bin flags <<<"$spec"
	[[ $name == uring-read* ]] && continue
	BIN=$bin
	read -ra SERVER_FLAGS <<<"$flags"
	start_server "${name%%-*}" 1 "$SERVER_CPU" || continue
	{
		echo "== $name"
		"$WORKDIR/stall" -addr "$BENCH_HOST:$SERVER_PORT" -dir "$DOCROOT" -pid "$SERVER_PID" \
			-n "$STALLED" -path /4m.bin -fresh /200k.bin,/4m.bin 2>&1
	} | tee -a "$OUT/stall.txt" >&2
	stop_server
done

# summary.md: medians per server and size.
{
	echo "# io_uring file bodies against epoll ($(date +%F), commit $COMMIT)"
	echo
	echo "Rerun: \`$([[ -n ${BASE:-} ]] && echo "BASE=$BASE ")$([[ -n ${SIZES_SET:-} ]] && echo "SIZES=\"${SIZES[*]}\" ")ROUNDS=$ROUNDS DURATION=$DURATION $( ((STALL)) || echo "STALL=0 ")flock -x /tmp/twinloop.lock scripts/bodies.sh\`. Machine and settings: env.txt."
	echo "Medians of $ROUNDS interleaved runs, wrk -t1 -c50 keep-alive, one loop; CPU-µs/req is the server's."
	echo
	echo "| server | size | req/s | CPU-µs/req | syscalls/req | iou-wrk threads |"
	echo "|---|---|---|---|---|---|"
	for size in "${SIZES[@]}"; do
		for spec in "${SERVERS[@]}"; do
			name=${spec%%:*}
			awk -F, -v s="$name" -v z="$size" '
			function med(a, n,   i, j, t) {
				for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
				return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
			}
			$1 == s && $2 == z { n++; r[n] = $4; c[n] = $5; y[n] = $6; w[n] = $7 }
			END { if (n) printf "| %s | %s | %.0f | %.1f | %.2f | %d |\n", s, z, med(r, n), med(c, n), med(y, n), med(w, n) }' "$CSV"
		done
	done
	if ((STALL)); then
		echo
		echo "## Clients that do not read ($STALLED, one loop)"
		echo
		echo "Fresh downloads (ms) and io_uring worker threads, idle, then three times while the clients stall:"
		echo
		echo '```'
		cat "$OUT/stall.txt"
		echo '```'
	fi
} >"$OUT/summary.md"
{
	loadavg end
	echo "elapsed: $SECONDS s"
} >>"$OUT/env.txt"
log "results in $OUT"
cat "$OUT/summary.md"
