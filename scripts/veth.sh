#!/usr/bin/env bash
# veth.sh measures --uring-napi, io_uring's NAPI busy polling (issue 28),
# where it has something to poll: loopback has no NAPI context, a veth
# pair with GRO on has. Into results/YYYY-MM-DD_<commit>_veth-napi[_quick]/.
#
#   sudo scripts/veth.sh [--quick]      (QUICK=1: 1 round of 3 s)
#
# The link: two network namespaces of this script's own, joined by a veth
# pair, 10.77.0.1/24 (the server's side) and 10.77.0.2/24 (the client's).
# Nothing is added to the host's namespace or its interfaces; a trap on
# exit kills what the script started and deletes both namespaces (which
# deletes the pair), also when a step fails or the script is interrupted.
#
# What a veth needs for NAPI (drivers/net/veth.c, Linux 6.18), two things:
#   - GRO on the receiving end. A veth has NAPI only when an XDP program is
#     attached or, since Linux 5.13 ("veth: allow enabling NAPI even
#     without XDP"), when GRO is on: veth_set_features and veth_open call
#     veth_napi_enable when NETIF_F_GRO is requested and no XDP program is
#     attached (GRO is off by default on a veth). Each rx queue is then a
#     NAPI instance with an id (netif_napi_add).
#   - TSO off on the sending end. veth_xmit queues an skb on the peer's
#     NAPI only when veth_skb_is_eligible_for_gro says so: when the
#     sending device has no TSO (NETIF_F_ALL_TSO), or for a local UDP or
#     ICMP skb (sock_wfree; TCP's is tcp_wfree) when the receiver has
#     rx-gro-list or rx-udp-gro-forwarding on. A TCP skb from a device
#     with TSO, a veth's default, goes by __netif_rx to the sending CPU's
#     backlog, whose NAPI has no device and no id: "gro on" alone gives
#     TCP no NAPI at all (checked here: every napi:napi_poll was the
#     backlog's, "(no_device)").
# With both, the peer's xmit puts the skb on the ring of the receiving
# rq and schedules its NAPI on the sending CPU (__veth_xdp_flush), the
# poll's napi_gro_receive stamps the NAPI id on the skb, and TCP copies it
# to the socket (sk_mark_napi_id): the id that io_uring's dynamic
# tracking adds to the ring's list when it arms a poll on the socket
# (__io_napi_add ignores ids below MIN_NAPI_ID, as the backlog's).
# So both ends get "ethtool -K DEV gro on tso off" (the server's end
# receives the requests, the client's the responses; GSO still cuts large
# sends in software), and the script stops if ethtool -k does not then
# say so.
#
# Whether the server's loop really polls: round 1 of each cell adds a
# NAPI_SECONDS run under perf record -e napi:napi_poll -a -g (the
# tracepoint fires for every poll, from a softirq or from a busy poll),
# and each poll of the server's veth is counted as a busy poll when its
# call chain holds __napi_busy_loop (napi.csv: polls per request, and the
# busy share). Without --uring-napi every poll is a softirq's.
#
# Cells, interleaved in each of ROUNDS rounds, each a fresh server with
# one loop in the server's namespace pinned to CPU 0 (taskset), and wrk
# -t1 -c50 keep-alive for the 1500-byte page in the client's, pinned to
# CPU 1:
#   epoll             --backend=epoll
#   uring             --backend=uring (its default flags)
#   napi-USEC         --backend=uring --uring-napi=USEC, for each USEC of
#                     NAPI_USECS ("0 50 200"; 0 polls once per wait)
#   uring-aa          uring again, last in each round: the A/A pair
# Per cell and round: warm-up (WARMUP s), then one measured wrk run
# (DURATION s) under the lab's meter (scripts/lib.sh meter_start and
# meter_stop: it waits for a quiet machine, then takes the server's CPU,
# the whole machine's from /proc/stat, softirq's and wrk's, per request).
#
# Environment: QUICK, ROUNDS (5), DURATION (5), WARMUP (1), NAPI_USECS,
# NAPI_SECONDS (2; 0 skips the perf record runs), PORT (18080), BIN,
# RESULTS. About 6 minutes with the defaults.
#
# Needs root (ip netns, ethtool -K) and 2 CPUs; installs wrk, ethtool and
# linux-perf with apt-get when missing. Load goes only to 10.77.0.1 inside
# the namespaces, every wrk run stops after its duration (--timeout 10s),
# and only processes this script started are ever signalled.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPTS=$ROOT/scripts
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"

quick_args "$@"
if ((QUICK)); then
	ROUNDS=${ROUNDS:-1} DURATION=${DURATION:-3}
else
	ROUNDS=${ROUNDS:-5} DURATION=${DURATION:-5}
fi
WARMUP=${WARMUP:-1} NAPI_SECONDS=${NAPI_SECONDS:-2}
read -ra NAPI_USECS <<<"${NAPI_USECS:-0 50 200}"
PORT=${PORT:-18080}
((PORT > 0 && PORT < 32768)) || die "PORT $PORT: give one below 32768, outside the ephemeral range"
SERVER_CPU=0 WRK_CPU=1 CONNS=50
NS_SRV=twinloop-veth-srv-$$ NS_CLI=twinloop-veth-cli-$$
DEV_SRV=tlv$$s DEV_CLI=tlv$$c # at most 15 characters
SRV_IP=10.77.0.1 CLI_IP=10.77.0.2
START=$(date +%s)
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)

((EUID == 0)) || die "run as root: it makes network namespaces and sets GRO on the veth pair"
(($(nproc) >= 2)) || die "needs 2 CPUs: the server on CPU 0, wrk on CPU 1"
need wrk ethtool taskset:util-linux ip:iproute2
PERF=0
if ((NAPI_SECONDS > 0)); then
	need perf:linux-perf
	if perf list tracepoint 2>/dev/null | grep 'napi:napi_poll' >/dev/null; then # not grep -q: pipefail
		PERF=1
	else
		log "perf cannot see the napi:napi_poll tracepoint: no napi.csv"
	fi
fi

# The cells: id|twinloop flags|label.
CELLS=("epoll|--backend=epoll|epoll" "uring|--backend=uring|io_uring default")
for u in "${NAPI_USECS[@]}"; do
	[[ $u =~ ^[0-9]+$ ]] || die "NAPI_USECS: $u is not a number of microseconds"
	CELLS+=("napi-$u|--backend=uring --uring-napi=$u|io_uring --uring-napi=$u")
done
CELLS+=("uring-aa|--backend=uring|A/A: io_uring default again in a later slot") # no comma: summary.csv is read with awk -F,

lab_setup veth
# lab_exit stops the processes first; a namespace goes once nothing is left in it.
trap 'lab_exit; veth_down' EXIT

veth_down() {
	ip netns del "$NS_SRV" 2>/dev/null
	ip netns del "$NS_CLI" 2>/dev/null
	return 0
}

# veth_up: the namespaces, the pair between them, GRO (hence NAPI) on
# both ends, TSO off (see the header).
veth_up() {
	local ns dev ip
	ip netns add "$NS_SRV" || die "ip netns add $NS_SRV failed"
	ip netns add "$NS_CLI" || die "ip netns add $NS_CLI failed"
	ip link add "$DEV_SRV" netns "$NS_SRV" type veth peer name "$DEV_CLI" netns "$NS_CLI" ||
		die "ip link add ... type veth failed"
	for ns in "$NS_SRV:$DEV_SRV:$SRV_IP" "$NS_CLI:$DEV_CLI:$CLI_IP"; do
		IFS=: read -r ns dev ip <<<"$ns"
		if ! { ip -n "$ns" link set lo up && ip -n "$ns" addr add "$ip/24" dev "$dev" &&
			ip -n "$ns" link set "$dev" up && ip netns exec "$ns" ethtool -K "$dev" gro on tso off; }; then
			die "cannot set $dev up in $ns with GRO on and TSO off"
		fi
		ip netns exec "$ns" ethtool -k "$dev" >"$WORKDIR/ethtool.txt"
		if ! grep -x 'generic-receive-offload: on' "$WORKDIR/ethtool.txt" >/dev/null ||
			! grep -x 'tcp-segmentation-offload: off' "$WORKDIR/ethtool.txt" >/dev/null; then
			die "$dev: GRO is not on or TSO not off, so TCP over the veth gets no NAPI"
		fi
	done
}

# reachable: the server in its namespace accepts connections from the client's.
reachable() {
	ip netns exec "$NS_CLI" bash -c "exec 3<>/dev/tcp/$SRV_IP/$PORT" 2>/dev/null
}

# start_veth_server FLAGS...: twinloop with one loop in the server's
# namespace, pinned to SERVER_CPU, sets what scripts/lib.sh's start_server
# sets. ip netns exec and taskset exec the server, so $! is its PID.
start_veth_server() {
	local i
	SERVER_PORT=$PORT
	SERVER_LOG=$WORKDIR/logs/$ID-$(date +%s%N).log
	mkdir -p "$WORKDIR/logs"
	ip netns exec "$NS_SRV" taskset -c "$SERVER_CPU" "$BIN" --loops 1 --listen "$SRV_IP:$PORT" \
		--dir "$DOCROOT" --stats 100ms "$@" >/dev/null 2>"$SERVER_LOG" &
	SERVER_PID=$!
	BENCH_PIDS+=("$SERVER_PID")
	SERVER_PIDS=("$SERVER_PID")
	for ((i = 0; i < 100; i++)); do
		kill -0 "$SERVER_PID" 2>/dev/null || break
		reachable && return 0
		sleep 0.1
	done
	log "$ID: the server did not start; its log:"
	sed 's/^/    /' "$SERVER_LOG" >&2
	stop_server
	return 1
}

# run_veth_wrk OUT SECONDS: wrk -t1 -c50 keep-alive for the 1500-byte page,
# in the client's namespace, pinned to WRK_CPU (run_client).
run_veth_wrk() {
	run_client "$1" ip netns exec "$NS_CLI" wrk -t1 -c"$CONNS" -d"$2s" --timeout 10s --latency "http://$SRV_IP:$PORT/"
}

# napi_evidence STEP: a NAPI_SECONDS run under perf record -e
# napi:napi_poll -a -g; a row of napi.csv: polls of each veth per request,
# and how many of them were busy polls (__napi_busy_loop in the chain).
napi_evidence() {
	local id=$1 raw=$OUT/raw/$1-napi-wrk.txt data=$WORKDIR/napi.data req
	perf record -q -e napi:napi_poll -a -g -o "$data" >/dev/null 2>&1 &
	ATTACH_PID=$!
	BENCH_PIDS+=("$ATTACH_PID")
	sleep 0.5
	run_veth_wrk "$raw" "$NAPI_SECONDS"
	sys_detach
	quiesce "${SERVER_PIDS[@]}"
	req=$(wrk_field "$raw" requests) || req=0
	perf script -i "$data" -F cpu,trace,ip,sym 2>/dev/null | awk -v id="$id" -v req="$req" -v srv="$DEV_SRV" -v cli="$DEV_CLI" '
		function done_one() { if (dev != "") { polls[dev]++; if (busy) busys[dev]++ }; dev = ""; busy = 0 }
		/napi poll on napi struct/ { done_one(); for (i = 1; i < NF; i++) if ($i == "device") dev = $(i + 1); next }
		/__napi_busy_loop|napi_busy_loop_rcu/ { busy = 1 }
		END { done_one()
			printf "%s,%d,%.4f,%.4f,%.4f,%.4f\n", id, req,
				req ? polls[srv] / req : 0, req ? busys[srv] / req : 0,
				req ? polls[cli] / req : 0, req ? busys[cli] / req : 0 }' >>"$OUT/napi.csv"
	rm -f "$data"
	log "$id: napi polls per request (server veth, busy; client veth, busy): $(tail -1 "$OUT/napi.csv" | cut -d, -f3-)"
}

# run_cell ROUND CELL: a fresh server, warm-up, (the NAPI evidence run),
# the measured run, a row of summary.csv.
run_cell() {
	local round=$1 flags label raw req rss try cols
	IFS='|' read -r ID flags label <<<"$2"
	read -ra SERVER_FLAGS <<<"$flags"
	start_veth_server "${SERVER_FLAGS[@]}" || return 1
	run_veth_wrk "$WORKDIR/warmup.txt" "$WARMUP"
	quiesce "${SERVER_PIDS[@]}"
	((round == 1 && PERF)) && napi_evidence "$ID"
	raw=$OUT/raw/$ID-run$round.txt
	for try in 1 2 3; do # again while other processes' CPU spoils the run
		meter_start "${SERVER_PIDS[@]}"
		run_veth_wrk "$raw" "$DURATION"
		quiesce "${SERVER_PIDS[@]}"
		req=$(wrk_field "$raw" requests) || req=0
		meter_stop "$req"
		rss=$(peak_rss_kb "${SERVER_PIDS[@]}")
		((METER_NOISY)) || break
		log "round $round $ID: other processes took $METER_OTHERS ticks; measured again ($try)"
	done
	stop_server
	cols=(step="$ID" label="$label" run="$round" "${METER_COLS[@]}" conns="$CONNS" peak_rss_kb="$rss")
	"$WRKPARSE" row ladder "$raw" "${cols[@]}" >>"$CSV" || "$WRKPARSE" row ladder - "${cols[@]}" >>"$CSV"
	log "round $round $ID: $(wrk_field "$raw" rps) req/s, CPU-µs/req $METER_CPU server, $METER_MACHINE machine ($METER_SOFTIRQ softirq), $METER_CLIENT wrk"
}

# --- summary.md ---------------------------------------------------------------

# medians: per step, in CELLS' order, the medians of summary.csv's
# columns named, and the machine figure's min-max, as table rows.
medians() {
	local c id label
	for c in "${CELLS[@]}"; do
		IFS='|' read -r id _ label <<<"$c"
		awk -F, -v id="$id" -v label="$label" '
			NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
			$col["step"] == id { n++; rps[n] = $col["rps"]; p99[n] = $col["p99_us"]; cpu[n] = $col["cpu_us_per_req"]
				m[n] = $col["machine_cpu_us_per_req"]; si[n] = $col["softirq_us_per_req"]; cl[n] = $col["client_cpu_us_per_req"]
				cs[n] = $col["cs_per_req"]; err += $col["errors"] + $col["non2xx"] }
			function med(a,   k, j, t, b) { for (k = 1; k <= n; k++) b[k] = a[k] + 0
				for (k = 2; k <= n; k++) for (j = k; j > 1 && b[j - 1] > b[j]; j--) { t = b[j]; b[j] = b[j - 1]; b[j - 1] = t }
				return n % 2 ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2 }
			function lo(a,   k, v) { v = a[1] + 0; for (k = 2; k <= n; k++) if (a[k] + 0 < v) v = a[k] + 0; return v }
			function hi(a,   k, v) { v = a[1] + 0; for (k = 2; k <= n; k++) if (a[k] + 0 > v) v = a[k] + 0; return v }
			END { if (!n) exit
				printf "| %s | %s | %.0f | %.0f | %.2f | %.2f | %.2f-%.2f | %.2f | %.2f | %.3f | %d |\n", id, label,
					med(rps), med(p99), med(cpu), med(m), lo(m), hi(m), med(si), med(cl), med(cs), err }' "$CSV"
	done
}

# machine_median ID: the median whole-machine CPU-µs per request of a step.
machine_median() {
	awk -F, -v id="$1" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
		$col["step"] == id { print $col["machine_cpu_us_per_req"] }' "$CSV" |
		sort -g | awk '{ a[NR] = $1 } END { if (NR) printf "%.2f", NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

write_summary() {
	local aa u ab c
	{
		echo "# io_uring NAPI busy polling over a veth pair: $(basename "$OUT")"
		echo
		echo "Made by \`scripts/veth.sh\` (its header says how each figure is measured and why the"
		echo "veth needs GRO on and TSO off). Rerun, on a quiet machine, as root:"
		echo
		echo '```'
		echo "flock -x /tmp/twinloop.lock env ROUNDS=$ROUNDS DURATION=$DURATION NAPI_USECS=\"${NAPI_USECS[*]}\" scripts/veth.sh"
		echo '```'
		echo
		echo '```'
		cat "$OUT/env.txt"
		echo '```'
		echo
		echo "Medians over $ROUNDS interleaved rounds, c=$CONNS keep-alive, 1500 B, one loop on CPU $SERVER_CPU"
		echo "in one namespace, wrk -t1 on CPU $WRK_CPU in the other. The whole machine's CPU per request"
		echo "(every CPU's busy time in /proc/stat) is the figure that compares backends: busy polling"
		echo "moves the receive path from the sender's softirq to the server's own time."
		echo
		echo "| step | what | req/s | p99 µs | server CPU-µs/req | machine CPU-µs/req | machine, min-max | softirq CPU-µs/req | wrk CPU-µs/req | ctx sw/req | errors + non-2xx |"
		echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		medians
		echo
		echo "## Ratios of whole-machine CPU-µs per request"
		echo
		echo "| pair | CPU-µs/req | ratio |"
		echo "|---|---|---:|"
		aa=$(machine_median uring-aa) u=$(machine_median uring)
		[[ -n $aa && -n $u ]] && echo "| A/A: uring-aa in a later slot ÷ uring | $aa ÷ $u | $(div "$aa" "$u") |"
		for c in "${CELLS[@]}"; do
			[[ $c == napi-* || $c == epoll* ]] || continue
			ab=$(machine_median "${c%%|*}")
			[[ -n $ab && -n $u ]] && echo "| ${c%%|*} ÷ uring | $ab ÷ $u | $(div "$ab" "$u") |"
		done
		if [[ -s $OUT/napi.csv ]]; then
			echo
			echo "## Were the server's NAPI contexts polled? (round 1, ${NAPI_SECONDS} s under perf record)"
			echo
			echo "Polls of each veth's NAPI per request (tracepoint napi:napi_poll), and those made by a busy"
			echo "poll (\`__napi_busy_loop\` in the call chain) rather than by a softirq. The server's veth"
			echo "receives the requests; the client's, the responses."
			echo
			echo "| step | requests | server veth polls/req | of them busy polls | client veth polls/req | of them busy polls |"
			echo "|---|---:|---:|---:|---:|---:|"
			tail -n +2 "$OUT/napi.csv" | awk -F, '{ printf "| %s | %d | %.3f | %.3f | %.3f | %.3f |\n", $1, $2, $3, $4, $5, $6 }'
		fi
		echo
		echo "Files: \`summary.csv\` (one row per step and round, the ladder's schema, \`lab.Ladder\`:"
		echo "its syscall columns are empty here), \`napi.csv\`, \`env.txt\`, and \`raw/\` (every wrk report)."
	} >"$OUT/summary.md"
}

# --- the run ----------------------------------------------------------------

cd "$ROOT" || die "cannot cd to $ROOT"
build_server
build_wrkparse
DOCROOT=$WORKDIR/www
make_docroot "$DOCROOT"
veth_up

COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo nocommit)
RESULTS=${RESULTS:-$ROOT/results}
NAME=$(date +%F)_${COMMIT}_veth-napi
((QUICK)) && NAME+=_quick
results_dir "$NAME"
CSV=$OUT/summary.csv
"$WRKPARSE" header ladder >"$CSV"
((PERF)) && echo 'step,requests,srv_polls_per_req,srv_busy_polls_per_req,cli_polls_per_req,cli_busy_polls_per_req' >"$OUT/napi.csv"
{
	env_header
	echo "virtualization: $(systemd-detect-virt 2>/dev/null || echo unknown)"
	echo "wrk: $(wrk -v 2>&1 | head -1 | awk '{ print $2 }')"
	((PERF)) && echo "perf: $(perf --version 2>&1)"
	echo "quick: $QUICK"
	echo "load average at start (1, 5, 15 min): $LOADAVG"
	echo "link: veth $DEV_SRV ($SRV_IP/24, netns $NS_SRV) to $DEV_CLI ($CLI_IP/24, netns $NS_CLI), MTU $(ip -n "$NS_SRV" -o link show "$DEV_SRV" | sed -n 's/.* mtu \([0-9]*\).*/\1/p'), GRO on and TSO off on both ends (hence NAPI for TCP)"
	echo "offloads of $DEV_SRV: $(ip netns exec "$NS_SRV" ethtool -k "$DEV_SRV" | grep -E '^(generic-receive-offload|tcp-segmentation-offload|generic-segmentation-offload|rx-gro-list|rx-udp-gro-forwarding):' | tr '\n' ' ')"
	echo "net.core.busy_poll, busy_read: $(cat /proc/sys/net/core/busy_poll) $(cat /proc/sys/net/core/busy_read) (io_uring's timeout is --uring-napi's, not these)"
	echo "placement: server (--loops 1) on CPU $SERVER_CPU in $NS_SRV, wrk -t1 -c$CONNS keep-alive on CPU $WRK_CPU in $NS_CLI, http://$SRV_IP:$PORT/ (1500 B)"
	echo "runs: $ROUNDS interleaved rounds; per cell and round a fresh server, warm-up ${WARMUP}s, one ${DURATION}s run; round 1 adds a ${NAPI_SECONDS}s run under perf record -e napi:napi_poll -a -g"
	echo "cells: ${CELLS[*]%%|*}"
} >"$OUT/env.txt"
log "results go to $OUT"

log "${#CELLS[@]} cells x $ROUNDS rounds, about $(((${#CELLS[@]} * (ROUNDS * (WARMUP + DURATION + 3) + NAPI_SECONDS * PERF + 4 * PERF) + 59) / 60)) min"
for ((r = 1; r <= ROUNDS; r++)); do
	for c in "${CELLS[@]}"; do
		run_cell "$r" "$c"
	done
done

loadavg end >>"$OUT/env.txt"
echo "elapsed: $(($(date +%s) - START))s" >>"$OUT/env.txt"
DONE=1
write_summary
log "done in $((($(date +%s) - START) / 60))m$((($(date +%s) - START) % 60))s: $OUT"
