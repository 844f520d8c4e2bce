#!/usr/bin/env bash
# Zero-downtime replacement under load (docs/reference.md, "Replacing a running server").
# For each backend: wrk opens a connection per request (Connection: close)
# against a server; meanwhile a replacement starts with --takeover on the
# same port, then the old server gets SIGTERM and must exit 0; three times
# in a row. Then it reports wrk's requests, socket errors and non-2xx, and
# each generation's own counters. PASS needs 0 socket errors, 0 non-2xx,
# every old server exiting 0.
#
#   scripts/takeover.sh [SECONDS] [BACKEND...]   (defaults: 12, epoll uring)
#   MIGRATE_REQ=0 scripts/takeover.sh            (the same, with the sysctl off)
#
# It re-runs itself in a network namespace of its own (unshare -n, root),
# with loopback up and net.ipv4.tcp_migrate_req set to MIGRATE_REQ (default
# 1) there, so the host's setting is left alone. Load is bounded in time and
# goes to 127.0.0.1 only; it signals only the processes it started. Run it
# under the benchmark lock: flock -x /tmp/twinloop.lock scripts/takeover.sh
# Output: stdout, and results/takeover/<backend>[-migrate0].txt.
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$0")/.."
top=$PWD
. scripts/lib.sh

secs=${1:-12}
shift || true
backends=("$@")
((${#backends[@]})) || backends=(epoll uring)
migrate=${MIGRATE_REQ:-1}
port=${TAKEOVER_PORT:-20200}

if [[ ${TAKEOVER_NETNS:-} != 1 ]]; then
	command -v wrk >/dev/null || apt_install wrk || die "apt-get install wrk failed"
	mkdir -p bin
	go build -o bin/server ./cmd/server
	WORKDIR=$PWD/bin build_wrkparse # exported: the run in the namespace uses it
	exec unshare -n env TAKEOVER_NETNS=1 "$self" "$secs" "${backends[@]}"
fi
ip link set lo up 2>/dev/null || python3 -c 'import fcntl,socket,struct
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)
r=bytearray(struct.pack("16sH22x",b"lo",0)); fcntl.ioctl(s,0x8913,r)
f=struct.unpack_from("H",r,16)[0]|1; struct.pack_into("H",r,16,f); fcntl.ioctl(s,0x8914,bytes(r))'
echo "$migrate" > /proc/sys/net/ipv4/tcp_migrate_req

bench_traps
work=$(mktemp -d)
trap 'bench_cleanup; rm -rf "$work"' EXIT
www=$work/www
set +o pipefail # make_docroot ends its writers with SIGPIPE
make_docroot "$www"
set -o pipefail
mkdir -p results/takeover
suffix=; [[ $migrate == 1 ]] || suffix=-migrate$migrate
ncpu=$(nproc)
srv_cpu=0; wrk_cpu=$((ncpu > 1 ? 1 : 0))
overall=PASS

start() { # start BACKEND GEN [--takeover]: a server generation; sets pid
	taskset -c "$srv_cpu" bin/server --backend="$1" --listen "127.0.0.1:$port" --dir "$www" \
		--loops 2 --shutdown-timeout 5s ${3:-} 2> "$work/gen$2.err" &
	pid=$!
	BENCH_PIDS+=("$pid")
	local i
	for ((i = 0; i < 100; i++)); do
		grep -q "server: serving" "$work/gen$2.err" && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	cat "$work/gen$2.err" >&2
	die "generation $2 did not start"
}

for be in "${backends[@]}"; do
	out=results/takeover/$be$suffix.txt
	log "backend $be: wrk ${secs}s with Connection: close, 3 replacements"
	start "$be" 0
	old=$pid
	taskset -c "$wrk_cpu" wrk -t1 -c32 -d"${secs}s" --timeout 10s -H "Connection: close" \
		"http://127.0.0.1:$port/" > "$work/wrk.txt" &
	wrk_pid=$!
	BENCH_PIDS+=("$wrk_pid")
	codes=()
	step=$((secs / 4))
	for gen in 1 2 3; do
		sleep "$step"
		start "$be" "$gen" --takeover
		new=$pid
		sleep 0.5
		kill -TERM "$old"
		rc=0
		wait "$old" || rc=$?
		forget "$old"
		codes+=("$rc")
		log "  generation $((gen - 1)) exited $rc; generation $gen serves"
		old=$new
	done
	wait "$wrk_pid" || true
	forget "$wrk_pid"
	kill -TERM "$old"
	wait "$old" || true
	forget "$old"

	read -r requests sockerr non2xx < <(wrk_field "$work/wrk.txt" requests errors non2xx) || true # an unfinished report: empty
			sockerr=${sockerr:-0} non2xx=${non2xx:-0}
	served=() srv_non2xx=0
	for gen in 0 1 2 3; do
		line=$(grep "server: stopped" "$work/gen$gen.err" || true)
		n=$(sed -n 's/.* requests=\([0-9]*\) .*/\1/p' <<<"$line")
		served+=("${n:-?}")
		for c in 3xx 4xx 5xx; do
			v=$(sed -n "s/.* $c=\([0-9]*\) .*/\1/p" <<<"$line")
			srv_non2xx=$((srv_non2xx + ${v:-0}))
		done
	done
	verdict=PASS
	[[ $sockerr == 0 && $non2xx == 0 && $srv_non2xx == 0 && ${codes[*]} == "0 0 0" ]] || verdict=FAIL
	[[ $verdict == PASS ]] || overall=FAIL
	{
		echo "takeover $(date -u +%FT%RZ) commit $(git -C "$top" rev-parse --short HEAD) backend=$be seconds=$secs tcp_migrate_req=$migrate: $verdict"
		echo "  $requests requests, socket errors $sockerr, non-2xx $non2xx (wrk); non-2xx counted by the servers: $srv_non2xx"
		echo "  old servers' exit codes: ${codes[*]}; requests served by generations 0..3: ${served[*]}"
		echo "  rerun: MIGRATE_REQ=$migrate flock -x /tmp/twinloop.lock scripts/takeover.sh $secs $be"
		echo "--- wrk"
		cat "$work/wrk.txt"
		echo "--- servers' stderr"
		for gen in 0 1 2 3; do sed "s/^/gen$gen: /" "$work/gen$gen.err"; done
	} > "$out"
	head -4 "$out"
done
echo "takeover: $overall"
[[ $overall == PASS ]]
