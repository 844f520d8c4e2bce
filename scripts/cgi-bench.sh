#!/usr/bin/env bash
# cgi-bench.sh measures twinloop's CGI: a hello-world script under wrk, for
# the epoll backend and, when it can run CGI here, io_uring, into
# results/cgi/ (summary.md, env.txt, raw/).
#
#   scripts/cgi-bench.sh            DURATION=5 CONNS="10 100" LOOPS=2 to change
#
# For each backend, one fresh server (--loops LOOPS, --cgi-dir with the
# script) and these wrk -t1 runs of DURATION seconds each:
#
#   static 10      GET / (1.5 KB from memory), the baseline
#   cgi CONNS      GET /cgi-bin/hello (a #!/bin/sh script: fork, exec, one
#                  printf and one echo), keep-alive, for each CONNS
#   mixed          static 10 while cgi 50 runs beside it: what CGI load
#                  costs the other clients of the same loops (the seed
#                  server, which waited for each child, served ~277 req/s
#                  of CGI and nothing else meanwhile)
#
# and the server's own counters at exit (syscalls per request). A backend
# that does not start with --cgi-dir (no io_uring here) is reported as
# skipped, with its reason.
#
# Only 127.0.0.1 is used. Every process started here is recorded, and only
# those are ever signalled: on exit, failure or Ctrl-C the ones still
# running are stopped. Each wrk run is bounded by DURATION and --timeout.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${RESULTS:-$ROOT/results/cgi}
DURATION=${DURATION:-5}
CONNS=${CONNS:-10 100}
LOOPS=${LOOPS:-2}
HOST=127.0.0.1
PORT_NEXT=${BENCH_PORT:-18380}
export GOFLAGS=${GOFLAGS:--ldflags=-checklinkname=0}

PIDS=() # started and not yet reaped
log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

forget() {
	local p keep=()
	for p in "${PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
	PIDS=("${keep[@]}")
}

# stop PID: SIGTERM, SIGKILL after 10 s, reap, forget.
stop() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	forget "$pid"
}

cleanup() {
	local p
	for p in "${PIDS[@]}"; do stop "$p"; done
	[[ -n ${WORK:-} ]] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

command -v wrk >/dev/null || die "wrk is not installed (apt-get install wrk)"

port_free() { ! (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }
next_port() {
	while ! port_free "$PORT_NEXT"; do PORT_NEXT=$((PORT_NEXT + 1)); done
	echo "$PORT_NEXT"
	PORT_NEXT=$((PORT_NEXT + 1))
}

WORK=$(mktemp -d)
mkdir -p "$WORK/www" "$WORK/cgi" "$OUT/raw"
head -c 1500 /dev/zero | tr '\0' 'x' >"$WORK/www/index.html"
cat >"$WORK/cgi/hello" <<'EOF'
#!/bin/sh
printf 'Content-Type: text/plain\n\n'
echo 'Hello World!'
EOF
chmod 0755 "$WORK/cgi/hello"

BIN=${BIN:-}
if [[ -z $BIN ]]; then
	BIN=$WORK/server
	log "building $BIN"
	(cd "$ROOT" && go build -o "$BIN" ./cmd/server) || die "build failed"
fi

# start BACKEND: the server on a free port; sets PORT, SPID, SLOG.
start() {
	local i
	PORT=$(next_port)
	SLOG=$WORK/server-$1.log
	"$BIN" --backend="$1" --loops "$LOOPS" --listen "$HOST:$PORT" --dir "$WORK/www" \
		--cgi-dir "$WORK/cgi" >/dev/null 2>"$SLOG" &
	SPID=$!
	PIDS+=("$SPID")
	for ((i = 0; i < 100; i++)); do
		if ! kill -0 "$SPID" 2>/dev/null; then
			wait "$SPID" 2>/dev/null
			forget "$SPID"
			return 1
		fi
		port_free "$PORT" || return 0
		sleep 0.1
	done
	stop "$SPID"
	return 1
}

# bench FILE CONNS PATH: one wrk run, in the background so that a signal
# is handled at once.
bench() {
	local pid
	wrk -t1 -c"$2" -d"${DURATION}s" --timeout 10s --latency "http://$HOST:$PORT$3" >"$1" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	wait "$pid"
	forget "$pid"
}

# field FILE: "req/s p50 p99 errors non2xx" from a wrk report.
field() {
	awk '
	function ms(v) {
		if (v ~ /us$/) return v / 1000
		if (v ~ /ms$/) return v + 0
		if (v ~ /s$/) return v * 1000
		return v
	}
	/^Requests\/sec:/ { rps = $2 }
	$1 == "50%" { p50 = ms($2) }
	$1 == "99%" { p99 = ms($2) }
	/Socket errors:/ { gsub(/,/, ""); err = $4 + $6 + $8 + $10 }
	/Non-2xx or 3xx responses:/ { non = $5 }
	END { printf "%.0f | %.2f | %.2f | %d | %d", rps, p50, p99, err, non }' "$1"
}

# counters LOG: the server's exit summary, the fields that matter here.
counters() {
	local line w out=()
	line=$(grep -m1 '^server: stopped' "$1")
	for w in $line; do
		case ${w%%=*} in
		requests | 5xx | syscalls_per_req | pipe2 | kill | epoll_ctl | read | write) out+=("$w") ;;
		esac
	done
	echo "\`${out[*]}\`"
}

LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
ROWS=()
NOTES=()
for be in epoll uring; do
	if ! start "$be"; then
		NOTES+=("- $be skipped: $(grep -m1 -v '^server: serving' "$SLOG" | sed 's/^server: //')")
		log "$be skipped"
		continue
	fi
	log "$be on port $PORT"
	bench "$OUT/raw/$be-static-c10.txt" 10 /
	ROWS+=("| $be | static | 10 | $(field "$OUT/raw/$be-static-c10.txt") |")
	for c in $CONNS; do
		bench "$OUT/raw/$be-cgi-c$c.txt" "$c" /cgi-bin/hello
		ROWS+=("| $be | cgi | $c | $(field "$OUT/raw/$be-cgi-c$c.txt") |")
		sleep 1 # the scripts of connections wrk left open are killed and reaped
	done
	# mixed: CGI load and static clients at once, on the same loops.
	wrk -t1 -c50 -d"${DURATION}s" --timeout 10s --latency "http://$HOST:$PORT/cgi-bin/hello" >"$OUT/raw/$be-mixed-cgi-c50.txt" 2>&1 &
	bg=$!
	PIDS+=("$bg")
	bench "$OUT/raw/$be-mixed-static-c10.txt" 10 /
	wait "$bg"
	forget "$bg"
	ROWS+=("| $be | mixed: cgi | 50 | $(field "$OUT/raw/$be-mixed-cgi-c50.txt") |")
	ROWS+=("| $be | mixed: static | 10 | $(field "$OUT/raw/$be-mixed-static-c10.txt") |")
	stop "$SPID"
	cp "$SLOG" "$OUT/raw/$be-server.log"
	NOTES+=("- $be counters at exit: $(counters "$SLOG")")
done

{
	echo "machine: $(uname -m), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	echo "kernel: $(uname -r)"
	echo "go: $(go version 2>/dev/null | cut -d' ' -f3-)"
	echo "commit: $(git -C "$ROOT" describe --always --dirty 2>/dev/null)"
	echo "date: $(date -u +%FT%TZ)"
	echo "load average before the run: $LOADAVG"
	echo "run: DURATION=$DURATION CONNS=\"$CONNS\" LOOPS=$LOOPS, wrk -t1 unpinned, server --loops $LOOPS"
} >"$OUT/env.txt"

{
	echo "# CGI hello world under wrk"
	echo
	echo "\`scripts/cgi-bench.sh\` ($(date -u +%F)). Each request forks and execs \`/bin/sh\` for a"
	echo "two-line script; the loops never wait for it (the script's stdout is one more fd"
	echo "in the event loop). Latency in ms."
	echo
	echo '```'
	cat "$OUT/env.txt"
	echo '```'
	echo
	echo "| backend | requests | conns | req/s | p50 | p99 | socket errors | non-2xx |"
	echo "|---|---|---|---|---|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
	echo
	printf '%s\n' "${NOTES[@]}"
} >"$OUT/summary.md"
cat "$OUT/summary.md"
