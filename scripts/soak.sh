#!/usr/bin/env bash
# Soak test: run the mixed client load of scripts/soak (keep-alive, close,
# pipelined, slow readers at 1 MiB/s and 64 KiB/s, 32 clients that read
# nothing, abandoned connections, slowloris, and fresh downloads of the
# 4 MiB file timed four times a second) against one backend for a bounded
# time, then check that the server leaked no fds, kept its memory, answered
# every response byte-exact, never made a fresh download wait (2 s), never
# ran more than 16 io_uring worker threads, and still serves.
#
#   scripts/soak.sh [epoll|uring] [SECONDS]     (defaults: epoll 60)
#
# Loopback only; it kills only the server it started. The summary goes to
# stdout and to results/soak/<backend>.txt.
set -euo pipefail
export GOFLAGS=-ldflags=-checklinkname=0
backend=${1:-epoll}
secs=${2:-60}
cd "$(dirname "$0")/.."
top=$PWD

work=$(mktemp -d)
server_pid=
cleanup() {
	if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

go build -o "$work/server" ./cmd/server
go build -o "$work/soak" ./scripts/soak
www=$work/www
mkdir -p "$www/sub"
head -c 1500 /dev/urandom | base64 -w 76 | head -c 1500 > "$www/index.html"
head -c 65536 /dev/urandom > "$www/64k.bin"
head -c 1048576 /dev/urandom > "$www/1m.bin"
head -c 4194304 /dev/urandom > "$www/4m.bin"
echo "sub" > "$www/sub/index.html"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$work/server" --backend="$backend" --listen "127.0.0.1:$port" --dir "$www" --loops 2 \
	--header-timeout 5s --keepalive-timeout 10s --write-timeout 10s 2> "$work/server.err" &
server_pid=$!
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done

fds() { ls "/proc/$server_pid/fd" | wc -l; }
# fdkinds: how many of the server's fds are sockets, pipes, files, ...
fdkinds() {
	for f in /proc/"$server_pid"/fd/*; do readlink "$f"; done 2>/dev/null |
		sed -E 's/^(socket|pipe|anon_inode):.*/\1/; s/^\/.*/file/' | sort | uniq -c | tr -s ' \n' ' '
}
rss() { awk '/VmRSS/ {print $2}' "/proc/$server_pid/status"; }
# workers: the server's io_uring worker threads (iou-wrk-*).
workers() { cat /proc/"$server_pid"/task/*/comm 2>/dev/null | grep -c '^iou-wrk' || true; }

# Warm-up: fills the file cache and the connection pools.
"$work/soak" -addr "127.0.0.1:$port" -dir "$www" -duration 3s -workers 2 > /dev/null
sleep 6 # let the slowloris clients of the warm-up time out
fd0=$(fds); rss0=$(rss); kinds0=$(fdkinds)

status=0
"$work/soak" -addr "127.0.0.1:$port" -dir "$www" -duration "${secs}s" -workers 4 > "$work/soak.out" 2>&1 &
soak_pid=$!
maxwrk=0
while kill -0 "$soak_pid" 2>/dev/null; do
	w=$(workers)
	((w > maxwrk)) && maxwrk=$w
	sleep 1
done
wait "$soak_pid" || status=$?
sleep 12 # keep-alive (10 s) and header (5 s) timeouts close what clients left open
if ! kill -0 "$server_pid" 2>/dev/null; then
	echo "soak: FAIL: the server died; its stderr ends with:" >&2
	tail -20 "$work/server.err" >&2
	exit 1
fi
fd1=$(fds); rss1=$(rss); kinds1=$(fdkinds)
still=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/")

kill -TERM "$server_pid"; wait "$server_pid" || status=1
server_pid=

verdict=PASS
[ "$status" -eq 0 ] || verdict=FAIL
# No socket or file may stay open beyond what was open before. Pipes may:
# the io_uring backend keeps its idle splice pipes for a second or two,
# within its pipe budget (2 fds each).
count() { local n; n=$(echo "$1" | grep -oE "[0-9]+ $2" | cut -d' ' -f1); echo "${n:-0}"; }
for kind in socket file anon_inode; do
	[ "$(count "$kinds1" $kind)" -le "$(count "$kinds0" $kind)" ] || verdict=FAIL
done
[ "$(count "$kinds1" pipe)" -le 256 ] || verdict=FAIL
[ "$rss1" -le "$((rss0 * 3 / 2 + 20480))" ] || verdict=FAIL
[ "$still" = 200 ] || verdict=FAIL
[ "$maxwrk" -le 16 ] || verdict=FAIL

summary=$(cat <<SUM
soak $(date -u +%Y-%m-%dT%H:%MZ) commit $(git rev-parse --short HEAD) backend=$backend seconds=$secs: $verdict
  $(cat "$work/soak.out")
  fds before/after: $fd0/$fd1 ($kinds0/$kinds1)   RSS KiB before/after: $rss0/$rss1   still serving: $still   io_uring workers at most: $maxwrk
  $(tail -1 "$work/server.err")
SUM
)
echo "$summary"
mkdir -p "$top/results/soak"
echo "$summary" >> "$top/results/soak/$backend.txt"
[ "$verdict" = PASS ]
