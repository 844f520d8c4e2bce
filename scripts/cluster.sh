#!/usr/bin/env bash
# Three twinloop instances behind HAProxy, and a rolling restart of every
# one of them under load (issue 12; deploy/README.md explains the layout).
#
#   CLUSTER_SECONDS=30 scripts/cluster.sh
#
# It installs HAProxy (Debian package) if missing, starts 3 instances on
# loopback (epoll, io_uring, epoll) with --proxy-protocol, an access log, a
# CGI script and --drain-delay, writes an HAProxy config that sends them
# PROXY v2 (send-proxy-v2), checks each one's /readyz on its --metrics
# port and retries, and checks first that the client's address, not
# HAProxy's, reaches an instance's access log and CGI: a client on
# 127.0.0.2 asks each instance through HAProxy. A peer outside
# --proxy-from and a malformed header, sent straight to an instance, are
# closed unserved. Then it puts wrk load (keep-alive, 32 connections)
# through HAProxy for CLUSTER_SECONDS (default 30). Meanwhile each instance
# in turn gets a plain SIGTERM, nothing else: its /readyz turns 503,
# HAProxy's check takes it out while it still serves (--drain-delay 2s),
# then it finishes what is in flight and exits 0; it is started again on
# its port and is back in rotation once its check passes. It prints the
# requests each instance served, and last "N requests, M failed" (wrk's
# requests; its socket errors plus non-2xx). Exit status 0 only with the
# addresses right, 0 failed and every instance exiting 0.
#
# Ports CLUSTER_PORT (default 20400) to +3, and +5 to +7 (--metrics), on
# 127.0.0.0/8 only. It signals only the processes it started. Run it under
# the benchmark lock:
#   flock -x /tmp/twinloop.lock scripts/cluster.sh
# Output: stdout, and results/cluster/cluster.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
secs=${CLUSTER_SECONDS:-30}
base=${CLUSTER_PORT:-20400}
front=$base
ports=($((base + 1)) $((base + 2)) $((base + 3)))
mports=($((base + 5)) $((base + 6)) $((base + 7)))
client=127.0.0.2 # the client the address check connects from: not HAProxy's 127.0.0.1
backends=(epoll uring epoll)

command -v haproxy >/dev/null || apt_install haproxy || die "apt-get install haproxy failed"
command -v wrk >/dev/null || apt_install wrk || die "apt-get install wrk failed"
for p in "$front" "${ports[@]}" "${mports[@]}"; do
	port_free "$p" || die "port $p is in use: set CLUSTER_PORT to a free range"
done
mkdir -p bin results/cluster
go build -o bin/server ./cmd/server
WORKDIR=$PWD/bin build_wrkparse
# io_uring where it runs, else epoll for that instance too. Where it
# runs, the server serves until timeout stops it, a second later.
if timeout 1 bin/server --backend=uring --listen 127.0.0.1:0 --dir www 2>&1 </dev/null | grep -q "cannot run here"; then
	backends[1]=epoll
fi

bench_traps
work=$(mktemp -d)
trap 'bench_cleanup; rm -rf "$work"' EXIT
set +o pipefail # make_docroot ends its writers with SIGPIPE
make_docroot "$work/www"
set -o pipefail
mkdir "$work/cgi"
printf '#!/bin/sh\nprintf "Content-Type: text/plain\\n\\n%%s %%s" "$REMOTE_ADDR" "$REMOTE_PORT"\n' > "$work/cgi/addr"
chmod 755 "$work/cgi/addr"

pids=() gens=(0 0 0) codes=()
start_instance() { # start_instance I: (re)start instance I on its port
	local i=$1 log=$work/s$1-gen${gens[$1]}
	# Only HAProxy, on 127.0.0.1, may send the PROXY header; the access
	# log (-v) goes to a file of its own.
	bin/server --backend="${backends[$i]}" --listen "127.0.0.1:${ports[$i]}" --dir "$work/www" \
		--loops 1 --shutdown-timeout 5s --drain-delay 2s --metrics "127.0.0.1:${mports[$i]}" \
		--proxy-protocol --proxy-from 127.0.0.1/32 --cgi-dir "$work/cgi" -v > "$log.log" 2> "$log.err" &
	pids[i]=$!
	BENCH_PIDS+=("${pids[i]}")
	wait_listening "${pids[i]}" "${ports[i]}" || { cat "$log.err" >&2; die "instance s$((i + 1)) did not start"; }
}
for i in 0 1 2; do start_instance "$i"; done

cat > "$work/haproxy.cfg" <<CFG
global
    maxconn 4096
    stats socket $work/haproxy.sock mode 600 level admin
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    # A request that could not reach an instance goes to another one.
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response response-timeout
frontend web
    bind 127.0.0.1:$front
    default_backend twinloop
backend twinloop
    balance roundrobin
    # Connections to the instances come from 127.0.0.1, the one address
    # their --proxy-from trusts, and start with a PROXY v2 header naming
    # one client: http-reuse never keeps each with its client for the
    # next requests, where the default let HAProxy close most of them
    # after each response (results/cluster/README.md).
    source 127.0.0.1
    http-reuse never
    # The check asks /readyz on the --metrics port (no PROXY header
    # there): 503 from an instance's SIGTERM on takes it out while it
    # still serves, for --drain-delay.
    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host cluster.local
    http-check expect status 200
    default-server inter 500ms fall 2 rise 2 send-proxy-v2
    server s1 127.0.0.1:${ports[0]} check port ${mports[0]}
    server s2 127.0.0.1:${ports[1]} check port ${mports[1]}
    server s3 127.0.0.1:${ports[2]} check port ${mports[2]}
CFG
haproxy -c -q -f "$work/haproxy.cfg"
# In a session of its own: a stopping HAProxy signals its process group.
setsid haproxy -db -f "$work/haproxy.cfg" 2> "$work/haproxy.err" &
hap_pid=$!
BENCH_PIDS+=("$hap_pid")
wait_listening "$hap_pid" "$front" || { cat "$work/haproxy.err" >&2; die "haproxy did not start"; }

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
stat() { # stat SERVER FIELD: one field of "show stat" for twinloop/SERVER
	hap "show stat" | awk -F, -v s="$1" -v f="$2" 'NR==1 {for (i=1;i<=NF;i++) if ($i==f || $i=="# "f) c=i} $1=="twinloop" && $2==s {print $c}'
}
for s in s1 s2 s3; do
	for ((t = 0; t < 50; t++)); do [[ $(stat "$s" status) == UP ]] && break; sleep 0.1; done
done

# The client's address through HAProxy: three requests from $client,
# round robin, one to each instance; each script must see the client's
# address and port, and each access log must name the client.
addr_ok=yes
for i in 0 1 2; do
	out=$(curl -sS --interface "$client" -w ' %{local_ip} %{local_port}' "http://127.0.0.1:$front/cgi-bin/addr") || out="curl failed"
	read -r saw_ip saw_port local_ip local_port <<< "$out"
	if [[ $saw_ip != "$client" || $saw_ip != "$local_ip" || $saw_port != "$local_port" ]]; then
		log "the CGI script saw \"$saw_ip $saw_port\" for a client at $local_ip $local_port"
		addr_ok=no
	fi
done
sleep 1.2 # the access log is written once a second
for i in 0 1 2; do
	if ! grep -q "^$client - - \[.*\"GET /cgi-bin/addr HTTP/1.1\" 200" "$work/s$i-gen0.log"; then
		log "s$((i + 1))'s access log has no line from $client"
		addr_ok=no
	fi
done
# Straight to s1, past HAProxy: a peer outside --proxy-from, a request
# without a header and a malformed header are closed, none answered.
refused_ok=yes
for how in untrusted bare malformed; do
	case $how in
	untrusted) got=$(curl -s --interface "$client" --haproxy-protocol "http://127.0.0.1:${ports[0]}/index.html" | head -c 15) || true ;;
	bare) got=$(curl -s "http://127.0.0.1:${ports[0]}/index.html" | head -c 15) || true ;;
	malformed) got=$(exec 3<>"/dev/tcp/127.0.0.1/${ports[0]}" && printf 'PROXY TCP4 203.0.113.7\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n' >&3 && timeout 5 head -c 15 <&3) || true ;;
	esac
	[[ -z $got ]] || { log "$how: answered \"$got\""; refused_ok=no; }
done
sleep 1.2 # the counters are published once a second
proxy_counts=$(curl -s "http://127.0.0.1:${mports[0]}/metrics" | awk '/^twinloop_proxy_headers_total/ {sub(/.*result="/, ""); sub(/"\} /, "="); print}' | sort | tr '\n' ' ')
log "address through HAProxy: $addr_ok; refused past it: $refused_ok; s1's proxy_headers_total: $proxy_counts"

log "wrk through HAProxy for ${secs}s; rolling restart of s1, s2, s3"
wrk -t1 -c32 -d"${secs}s" --timeout 10s "http://127.0.0.1:$front/" > "$work/wrk.txt" &
wrk_pid=$!
BENCH_PIDS+=("$wrk_pid")
# A restart takes about 5 s: --drain-delay (2 s), the shutdown, the start
# and two passing checks. One starts after each eighth of the run's quiet:
# at 30 s, the last is over by about 26 s, while wrk still runs.
step=$(awk -v s="$secs" 'BEGIN {print s / 8}')
under_load=yes
for i in 0 1 2; do
	s=s$((i + 1))
	sleep "$step"
	# A plain SIGTERM, as systemd or Kubernetes sends: /readyz turns
	# 503, and HAProxy's check takes the instance out within the drain.
	kill -TERM "${pids[i]}"
	t0=$(date +%s.%N) down=never
	for ((t = 0; t < 60; t++)); do
		[[ $(stat "$s" status) == DOWN* ]] && { down=$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN {printf "%.1fs", t1 - t0}'); break; }
		sleep 0.05
	done
	rc=0
	wait "${pids[i]}" || rc=$?
	forget "${pids[i]}"
	codes+=("$rc")
	gens[i]=$((gens[i] + 1))
	start_instance "$i"
	for ((t = 0; t < 100; t++)); do [[ $(stat "$s" status) == UP ]] && break; sleep 0.05; done
	log "  $s: SIGTERM, out of rotation after $down, stopped (exit $rc), restarted, $(stat "$s" status) again"
	kill -0 "$wrk_pid" 2>/dev/null || under_load=no
done
wait "$wrk_pid" || true
forget "$wrk_pid"
kill -TERM "${pids[@]}" # each drains for --drain-delay: all at once
for i in 0 1 2; do
	wait "${pids[i]}" || true
	forget "${pids[i]}"
done
kill -USR1 "$hap_pid" # HAProxy's soft stop
reap "$hap_pid" 5

read -r requests sockerr non2xx < <(wrk_field "$work/wrk.txt" requests errors non2xx) || true # an unfinished report: empty
failed=$((${sockerr:-0} + ${non2xx:-0}))
{
	echo "cluster $(date -u +%FT%RZ) commit $(git rev-parse --short HEAD) seconds=$secs: 3 instances behind $(haproxy -v | head -1 | cut -d' ' -f1-3)"
	for i in 0 1 2; do
		per=() sum=0
		for f in "$work"/s$i-gen*.err; do
			n=$(sed -n 's/.*server: stopped; requests=\([0-9]*\) .*/\1/p' "$f")
			per+=("${n:-?}")
			sum=$((sum + ${n:-0}))
		done
		echo "  s$((i + 1)) (${backends[i]}, 127.0.0.1:${ports[i]}): $sum requests (before/after its restart: ${per[*]})"
	done
	echo "  client address through HAProxy (send-proxy-v2) in the access logs and CGI: $addr_ok; untrusted, bare and malformed closed unserved: $refused_ok (s1: $proxy_counts)"
	echo "  instances' exit codes on SIGTERM during the rolling restart: ${codes[*]}"
	echo "  wrk: socket errors ${sockerr:-0}, non-2xx ${non2xx:-0}; every restart done under load: $under_load"
	echo "  rerun: CLUSTER_SECONDS=$secs flock -x /tmp/twinloop.lock scripts/cluster.sh"
	echo "--- wrk"
	cat "$work/wrk.txt"
	echo "--- haproxy.cfg"
	cat "$work/haproxy.cfg"
	echo "$requests requests, $failed failed"
} > results/cluster/cluster.txt
sed -n '1,/^--- wrk/p' results/cluster/cluster.txt | sed '$d'
echo "$requests requests, $failed failed"
[[ $under_load == yes ]] || log "wrk ended before the last restart was over: raise CLUSTER_SECONDS (30 or more)"
[[ $failed == 0 && ${codes[*]} == "0 0 0" && $under_load == yes && $addr_ok == yes && $refused_ok == yes ]]
