#!/usr/bin/env bash
# Why the cluster behind HAProxy lost two thirds of its throughput with
# PROXY v2 (issue 38, item 9): the same three instances and load as
# scripts/cluster.sh, without the restarts, through three HAProxy
# configurations, each run ROUNDS times (default 3) in a new random order
# every round, for PROXY_SECONDS (default 5) of wrk each:
#
#   http       mode http, no PROXY header (the cluster before PROXY v2)
#   http-pp2   mode http, send-proxy-v2 (the cluster's recipe since)
#   http-pp2-last  http-pp2 with option prefer-last-server
#   http-pp2-never http-pp2 with http-reuse never
#   tcp-pp2    mode tcp, send-proxy-v2 (one server connection per client)
#
# For each run it prints wrk's requests, the instances' accepted
# connections per request (their --metrics counters), HAProxy's own count
# of server connections made and reused (show stat: connect, reuse), and
# the established connections to the instances in the middle of the run
# (ss). STRACE=1 adds, after the rounds, one strace -c -f of HAProxy
# under 3 s of load per configuration (its syscalls per request).
#
#   ROUNDS=3 PROXY_SECONDS=5 scripts/cluster-proxy.sh
#
# Ports PROXY_PORT (default 21750) to +17, on 127.0.0.1 only. It signals
# only the processes it started. Output: stdout, and
# results/cluster/proxy-ab.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
secs=${PROXY_SECONDS:-5}
rounds=${ROUNDS:-3}
base=${PROXY_PORT:-21750}
front=$base
backends=(epoll uring epoll)
configs=(http http-pp2 http-pp2-last http-pp2-never tcp-pp2)

command -v haproxy >/dev/null || apt_install haproxy || die "apt-get install haproxy failed"
command -v wrk >/dev/null || apt_install wrk || die "apt-get install wrk failed"
[[ ${STRACE:-0} == 0 ]] || command -v strace >/dev/null || apt_install strace || die "apt-get install strace failed"
for ((p = base; p <= base + 17; p++)); do
	port_free "$p" || die "port $p is in use: set PROXY_PORT to a free range"
done
mkdir -p bin results/cluster
go build -o bin/server ./cmd/server
WORKDIR=$PWD/bin build_wrkparse
if timeout 1 bin/server --backend=uring --listen 127.0.0.1:0 --dir www 2>&1 </dev/null | grep -q "cannot run here"; then
	backends[1]=epoll
fi

load0=$(cut -d' ' -f1-3 /proc/loadavg)
bench_traps
work=$(mktemp -d)
trap 'bench_cleanup; rm -rf "$work"' EXIT
set +o pipefail # make_docroot ends its writers with SIGPIPE
make_docroot "$work/www"
set -o pipefail

# Two sets of the cluster's three instances, as cluster.sh starts them
# (--loops 1, an access log, --metrics): set pp2 with --proxy-protocol on
# base+1..3 (metrics +5..7), set plain without on base+11..13 (+15..17).
start_instance() { # start_instance SET I PORT MPORT FLAGS...
	local set=$1 i=$2 port=$3 mport=$4
	shift 4
	bin/server --backend="${backends[$i]}" --listen "127.0.0.1:$port" --dir "$work/www" \
		--loops 1 --metrics "127.0.0.1:$mport" -v "$@" > "$work/$set-s$i.log" 2> "$work/$set-s$i.err" &
	BENCH_PIDS+=("$!")
	wait_listening "$!" "$port" || { cat "$work/$set-s$i.err" >&2; die "instance $set s$i did not start"; }
}
for i in 0 1 2; do
	start_instance pp2 "$i" $((base + 1 + i)) $((base + 5 + i)) --proxy-protocol --proxy-from 127.0.0.1/32
	start_instance plain "$i" $((base + 11 + i)) $((base + 15 + i))
done

write_cfg() { # write_cfg CONFIG: HAProxy's config for it, cluster.sh's otherwise
	local mode=${1%%-*} off=1 send="" last=""
	[[ $1 == *-pp2* ]] && send=" send-proxy-v2" || off=11
	[[ $1 == *-last ]] && last="    option prefer-last-server"
	[[ $1 == *-never ]] && last="    http-reuse never"
	cat <<CFG
global
    maxconn 4096
    stats socket $work/haproxy.sock mode 600 level admin
defaults
    mode $mode
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    retries 3
    option redispatch 1
$([[ $mode == http ]] && echo "    retry-on conn-failure empty-response response-timeout")
frontend web
    bind 127.0.0.1:$front
    default_backend twinloop
backend twinloop
    balance roundrobin
$last
    source 127.0.0.1
    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host cluster.local
    http-check expect status 200
    default-server inter 500ms fall 2 rise 2$send
    server s1 127.0.0.1:$((base + off)) check port $((base + off + 4))
    server s2 127.0.0.1:$((base + off + 1)) check port $((base + off + 5))
    server s3 127.0.0.1:$((base + off + 2)) check port $((base + off + 6))
CFG
}

hap() { # hap COMMAND: HAProxy's runtime API, over its admin socket
	python3 - "$work/haproxy.sock" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode() + b"\n")
out = b""
while True:
    b = s.recv(65536)
    if not b: break
    out += b
sys.stdout.write(out.decode())
PY
}
hstat() { # hstat SERVER FIELD: one field of "show stat" for twinloop/SERVER
	hap "show stat" | awk -F, -v s="$1" -v f="$2" 'NR==1 {for (i=1;i<=NF;i++) if ($i==f || $i=="# "f) c=i} $1=="twinloop" && $2==s {print $c}'
}
counters() { # counters CONFIG: "accepts requests" summed over the set's instances
	local off=5 i
	[[ $1 == *-pp2* ]] || off=15
	for i in 0 1 2; do
		curl -s "http://127.0.0.1:$((base + off + i))/metrics"
	done | awk '/^twinloop_accepts_total/ {a += $2} /^twinloop_requests_total/ {r += $2} END {printf "%d %d\n", a, r}'
}
established() { # established CONFIG: TCP connections HAProxy holds to the instances now
	local off=1
	[[ $1 == *-pp2* ]] || off=11
	ss -Htn state established "( dport >= :$((base + off)) and dport <= :$((base + off + 2)) )" | wc -l
}

hap_pid=
start_haproxy() { # start_haproxy CONFIG
	write_cfg "$1" > "$work/haproxy.cfg"
	haproxy -c -q -f "$work/haproxy.cfg"
	setsid haproxy -db -f "$work/haproxy.cfg" 2> "$work/haproxy.err" &
	hap_pid=$!
	BENCH_PIDS+=("$hap_pid")
	wait_listening "$hap_pid" "$front" || { cat "$work/haproxy.err" >&2; die "haproxy did not start"; }
	local s t
	for s in s1 s2 s3; do
		for ((t = 0; t < 50; t++)); do [[ $(hstat "$s" status) == UP ]] && break; sleep 0.1; done
	done
}
stop_haproxy() {
	kill -USR1 "$hap_pid" # soft stop
	reap "$hap_pid" 5
}

out=$work/runs.txt
printf '%-14s %5s %9s %8s %9s %10s %8s %8s %7s\n' config round requests req/s accepts accept/req connect reuse ss_est > "$out"
for ((r = 1; r <= rounds; r++)); do
	for c in $(printf '%s\n' "${configs[@]}" | shuf); do
		start_haproxy "$c"
		sleep 1.2 # the instances publish their counters once a second
		read -r a0 q0 < <(counters "$c")
		wrk -t1 -c32 -d"${secs}s" --timeout 10s "http://127.0.0.1:$front/" > "$work/wrk.txt" &
		wrk_pid=$!
		BENCH_PIDS+=("$wrk_pid")
		sleep "$(awk -v s="$secs" 'BEGIN {print s / 2}')"
		est=$(established "$c")
		wait "$wrk_pid" || true
		forget "$wrk_pid"
		conn=0 reuse=0
		for s in s1 s2 s3; do
			conn=$((conn + $(hstat "$s" connect))) reuse=$((reuse + $(hstat "$s" reuse)))
		done
		sleep 1.2
		read -r a1 q1 < <(counters "$c")
		stop_haproxy
		read -r requests rps < <(wrk_field "$work/wrk.txt" requests rps)
		printf '%-14s %5d %9d %8.0f %9d %10.4f %8d %8d %7d\n' "$c" "$r" "$requests" "$rps" $((a1 - a0)) \
			"$(awk -v a=$((a1 - a0)) -v q=$((q1 - q0)) 'BEGIN {print q ? a / q : 0}')" "$conn" "$reuse" "$est" | tee -a "$out"
	done
done

if [[ ${STRACE:-0} != 0 ]]; then
	echo "--- strace -c -f of HAProxy under 3 s of wrk -t1 -c32 (slowed by strace: counts, not speed)" >> "$out"
	for c in "${configs[@]}"; do
		start_haproxy "$c"
		strace -c -f -p "$hap_pid" -o "$work/strace-$c.txt" &
		st_pid=$!
		BENCH_PIDS+=("$st_pid")
		sleep 0.5
		wrk -t1 -c32 -d3s --timeout 10s "http://127.0.0.1:$front/" > "$work/wrk.txt" || true
		kill -INT "$st_pid"
		reap "$st_pid" 5 || true # strace's status after SIGINT
		stop_haproxy
		requests=$(wrk_field "$work/wrk.txt" requests)
		{
			echo "$c: $requests requests; calls per request:"
			awk -v n="$requests" '$NF ~ /^(accept4|connect|close|socket|recvfrom|sendto|epoll_wait|epoll_ctl|setsockopt|getsockopt|splice)$/ {
				calls = (NF == 6 ? $4 : $4); printf "    %-12s %9d  %.3f\n", $NF, calls, calls / n }' "$work/strace-$c.txt"
		} | tee -a "$out"
	done
fi

{
	echo "cluster-proxy $(date -u +%FT%RZ) commit $(git rev-parse --short HEAD): 3 instances (${backends[*]}, --loops 1, -v) behind $(haproxy -v | head -1 | cut -d' ' -f1-3), wrk -t1 -c32 -d${secs}s, $rounds rounds in a random order each"
	echo "  machine: $(nproc) CPUs, load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end (shared with other jobs: req/s are noisy, compare within a round)"
	echo "  rerun: ROUNDS=$rounds PROXY_SECONDS=$secs STRACE=${STRACE:-0} flock -x /tmp/twinloop.lock scripts/cluster-proxy.sh"
	cat "$out"
	echo "--- haproxy.cfg of http-pp2, the cluster recipe's (http: no send-proxy-v2, instances without --proxy-protocol; http-pp2-last: + option prefer-last-server; http-pp2-never: + http-reuse never; tcp-pp2: mode tcp)"
	write_cfg http-pp2 | grep -v "stats socket"
} > results/cluster/proxy-ab.txt
