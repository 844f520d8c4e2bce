#!/usr/bin/env bash
# veth.sh measures --uring-napi, io_uring's NAPI busy polling (issue 28),
# where it has something to poll: loopback has no NAPI context, a veth
# pair with GRO on has. It makes the link and hands the rounds to the
# lab's driver (scripts/steps/veth.steps, into
# results/YYYY-MM-DD_<commit>_veth[_quick]/), then removes the link.
#
#   sudo scripts/veth.sh [--quick] [LABRUN FLAGS...]
#
# The link: two network namespaces, twinloop-veth-srv and
# twinloop-veth-cli (veth.steps's netns line), joined by a veth pair,
# 10.77.0.1/24 (the server's side) and 10.77.0.2/24 (the client's).
# Nothing is added to the host's namespace or its interfaces; a trap on
# exit deletes both namespaces (which deletes the pair), also when a step
# fails or the script is interrupted.
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
# Whether the server's loop really polls: NAPI_SECONDS=2 adds, after the
# rounds, one short driver run per NAPI step under perf record -e
# napi:napi_poll -a -g (the tracepoint fires for every poll, from a softirq
# or from a busy poll) and counts each poll of the server's veth as busy
# when its call chain holds __napi_busy_loop (napi.txt: polls per request,
# and the busy share). Without --uring-napi every poll is a softirq's.
#
# Needs root (ip netns, ethtool -K) and 2 CPUs; installs wrk, ethtool and
# (with NAPI_SECONDS) linux-perf when missing. RESULTS: where the run's
# folder goes (results).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"

ARGS=()
for a in "$@"; do
	case $a in
	--quick) ARGS+=(-quick) ;;
	-h | --help)
		usage
		exit 0
		;;
	*) ARGS+=("$a") ;;
	esac
done
((${QUICK:-0})) && ARGS+=(-quick)
NAPI_SECONDS=${NAPI_SECONDS:-0} RESULTS=${RESULTS:-results}
NS_SRV=twinloop-veth-srv NS_CLI=twinloop-veth-cli
DEV_SRV=tlvs DEV_CLI=tlvc
SRV_IP=10.77.0.1 CLI_IP=10.77.0.2

((EUID == 0)) || die "run as root: it makes network namespaces and sets GRO on the veth pair"
need wrk ethtool taskset:util-linux ip:iproute2
((NAPI_SECONDS > 0)) && need perf:linux-perf
ip netns list | grep -qw "$NS_SRV" && die "$NS_SRV exists: another veth.sh is running (or ip netns del $NS_SRV $NS_CLI)"

veth_down() {
	ip netns del "$NS_SRV" 2>/dev/null
	ip netns del "$NS_CLI" 2>/dev/null
	return 0
}
trap veth_down EXIT

# The namespaces, the pair between them, GRO (hence NAPI) on both ends,
# TSO off (see above).
ip netns add "$NS_SRV" && ip netns add "$NS_CLI" || die "ip netns add failed"
ip link add "$DEV_SRV" netns "$NS_SRV" type veth peer name "$DEV_CLI" netns "$NS_CLI" ||
	die "ip link add ... type veth failed"
for spec in "$NS_SRV:$DEV_SRV:$SRV_IP" "$NS_CLI:$DEV_CLI:$CLI_IP"; do
	IFS=: read -r ns dev ip <<<"$spec"
	{ ip -n "$ns" link set lo up && ip -n "$ns" addr add "$ip/24" dev "$dev" &&
		ip -n "$ns" link set "$dev" up && ip netns exec "$ns" ethtool -K "$dev" gro on tso off; } ||
		die "cannot set $dev up in $ns with GRO on and TSO off"
	k=$(ip netns exec "$ns" ethtool -k "$dev")
	grep -qx 'generic-receive-offload: on' <<<"$k" && grep -qx 'tcp-segmentation-offload: off' <<<"$k" ||
		die "$dev: GRO is not on or TSO not off, so TCP over the veth gets no NAPI"
done
NOTE="veth $DEV_SRV ($SRV_IP/24, netns $NS_SRV) to $DEV_CLI ($CLI_IP/24, netns $NS_CLI), GRO on and TSO off on both ends; \
net.core.busy_poll, busy_read: $(</proc/sys/net/core/busy_poll) $(</proc/sys/net/core/busy_read)"

cd "$ROOT" || exit 1
go build -o bin/labrun ./scripts/labrun || die "go build ./scripts/labrun failed"
bin/labrun -steps scripts/steps/veth.steps -name veth -results "$RESULTS" -note "$NOTE" "${ARGS[@]}" || exit 1
((NAPI_SECONDS > 0)) || exit 0

# The NAPI evidence: each NAPI step once more under perf record; polls of
# each veth, and busy polls among them, per request of that run.
OUT=$(ls -td "$RESULTS"/*_veth* | head -1)
TMP=$(mktemp -d)
trap 'veth_down; rm -rf "$TMP"' EXIT
for id in uring napi-0 napi-50 napi-200; do
	perf record -q -e napi:napi_poll -a -g -o "$OUT/napi.data" -- bin/labrun -steps scripts/steps/veth.steps \
		-only "$id" -rounds 1 -warmup 0 -duration "${NAPI_SECONDS}s" -quiet=false -results "$TMP" -name "$id" >/dev/null 2>"$TMP/log" || die "$id: $(tail -3 "$TMP/log")"
	req=$(awk -F, 'NR == 2 { print $10 }' "$TMP"/*_"$id"/rounds.csv)
	perf script -i "$OUT/napi.data" -F cpu,trace,ip,sym 2>/dev/null | awk -v id="$id" -v req="${req:-0}" -v srv="$DEV_SRV" '
		function one() { if (dev == srv) { p++; if (busy) b++ }; dev = ""; busy = 0 }
		/napi poll on napi struct/ { one(); for (i = 1; i < NF; i++) if ($i == "device") dev = $(i + 1); next }
		/__napi_busy_loop|napi_busy_loop_rcu/ { busy = 1 }
		END { one(); printf "%s: %d requests, server veth polls/req %.4f, of them busy %.4f\n", id, req, req ? p / req : 0, req ? b / req : 0 }' |
		tee -a "$OUT/napi.txt"
	rm -f "$OUT/napi.data"
done
