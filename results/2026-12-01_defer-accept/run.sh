#!/usr/bin/env bash
# run.sh: TCP_DEFER_ACCEPT and SYN cookies at a 10,000-connection burst.
# For each variant ("label:BIN:FLAGS:BACKEND", BACKEND epoll or uring;
# nginx: "nginx:::nginx"), ROUNDS rounds
# interleaved, one loop (nginx: one worker) on CPU 0, wrk -t1 on CPU 1:
#   - c=10000 keep-alive /1m.html for 8 s after a 2 s warm-up: server CPU-ms
#     per GiB wrk read, the kernel's TCP counters over the run (nstat:
#     segments out, retransmitted, RTOs), and the MSS of the server's
#     sockets 3 s in (ss), as "count×mss" for the three most common;
#   - c=50 Connection: close / (1.5 KB) for 8 s: CPU-µs per request.
#
#   flock -x /tmp/twinloop.lock results/2026-12-01_defer-accept/run.sh \
#       "old:/tmp/old/server::epoll" "new:bin/server::epoll" \
#       "nodefer:bin/server:--no-defer-accept:epoll" "new:bin/server::uring" "nginx:::nginx"
#
# Env: ROUNDS=3 CELLS="c10k close". Only the servers and wrk it started
# are signalled; 127.0.0.1 only. nstat counts the whole machine: run it
# alone.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SCRIPTS=$ROOT/scripts
source "$ROOT/scripts/lib.sh"
help_flag "${1:-}"
(($# > 0)) || die "give variants as label:BIN:FLAGS:BACKEND"
PORT_NEXT=${PORT:-22600}
WRK_CPU=1
command -v wrk >/dev/null || apt_install wrk || die "apt-get install wrk failed"
command -v nstat >/dev/null || die "nstat (iproute2) is needed"
raise_nofile 30000
lab_setup defer
DOCROOT=$WORKDIR/www
make_docroot "$DOCROOT"
cd "$ROOT" || die "cannot cd to $ROOT"
build_wrkparse

printf 'variant\tbackend\tcell\tround\treq_s\tcpu_us_per_req\tgib_read\tcpu_ms_per_gib\tsegs_out\tretrans_segs\trto\tmss_top3\n'
for ((round = 1; round <= ${ROUNDS:-3}; round++)); do
	for cell in ${CELLS:-c10k close}; do
		for v in "$@"; do
			IFS=: read -r label BIN flags kind <<<"$v"
			kind=${kind:-epoll}
			read -ra SERVER_FLAGS <<<"$flags"
			start_server "$kind" 1 0 || continue
			case $cell in
			c10k) conns=10000 mode=keepalive path=/1m.html ;;
			close) conns=50 mode=close path=/ ;;
			esac
			run_wrk "$WORKDIR/warm.txt" "$conns" "$mode" "$path" 2
			quiesce "${SERVER_PIDS[@]}"
			nstat -n
			t0=$(cpu_ticks "${SERVER_PIDS[@]}")
			(sleep 3 && ss -tni state established "( sport = :$SERVER_PORT )" >"$WORKDIR/ss.txt") &
			sspid=$!
			BENCH_PIDS+=("$sspid")
			run_wrk "$WORKDIR/wrk.txt" "$conns" "$mode" "$path" 8
			t1=$(cpu_ticks "${SERVER_PIDS[@]}")
			ns=$(nstat 2>/dev/null)
			wait "$sspid"
			forget "$sspid"
			stop_server
			read -r reqs rps < <(wrk_field "$WORKDIR/wrk.txt" requests rps) || { log "$label $cell: wrk did not finish"; continue; }
			gib=$(gib_read "$WORKDIR/wrk.txt")
			cpu=$(awk -v t=$((t1 - t0)) -v n="$reqs" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }')
			perg=$(awk -v t=$((t1 - t0)) -v g="$gib" -v hz="$CLK_TCK" 'BEGIN { if (g > 0) printf "%.0f", t / hz * 1e3 / g; else print "-" }')
			segs=$(awk '$1 == "TcpOutSegs" { print $2 }' <<<"$ns")
			retr=$(awk '$1 == "TcpRetransSegs" { print $2 }' <<<"$ns")
			rto=$(awk '$1 == "TcpExtTCPTimeouts" { print $2 }' <<<"$ns")
			mss=$(grep -o ' mss:[0-9]*' "$WORKDIR/ss.txt" | sort | uniq -c | sort -rn | head -3 | awk '{ sub(/mss:/, "", $2); printf "%s%s×%s", (NR > 1 ? "," : ""), $1, $2 }')
			printf '%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$kind" "$cell" "$round" "$rps" "$cpu" "$gib" "$perg" "${segs:-0}" "${retr:-0}" "${rto:-0}" "${mss:--}"
		done
	done
done
