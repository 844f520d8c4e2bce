#!/usr/bin/env bash
# cgi-bench.sh measures twinloop's CGI: a hello-world script under wrk, for
# the epoll backend and, when it can run CGI here, io_uring, into
# results/cgi/ (summary.md, summary.csv, env.txt, raw/).
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
# It runs on lib.sh (the server's start and stop, wrk, and the wrk parser,
# scripts/wrkparse: latencies in µs, summary.csv in the schema "cgi" of
# scripts/lab). Only 127.0.0.1 is used. Every process started here is
# recorded, and only those are ever signalled: on exit, failure or Ctrl-C
# the ones still running are stopped. Each wrk run is bounded by DURATION
# and --timeout. Installs wrk with apt-get when missing.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPTS=$ROOT/scripts
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"
RESULTS_DIR=${RESULTS:-$ROOT/results/cgi}
DURATION=${DURATION:-5}
CONNS=${CONNS:-10 100}
LOOPS=${LOOPS:-2}
PORT_NEXT=${BENCH_PORT:-18380}
# Unpinned, as before: the server and wrk may use every CPU.
ALL_CPUS=0-$(($(nproc) - 1))
WRK_CPU=$ALL_CPUS

command -v wrk >/dev/null || apt_install wrk || die "apt-get install wrk failed"

lab_setup cgi
cd "$ROOT" || die "cannot cd to $ROOT"
build_wrkparse
DOCROOT=$WORKDIR/www
mkdir -p "$DOCROOT" "$WORKDIR/cgi" "$RESULTS_DIR/raw"
head -c 1500 /dev/zero | tr '\0' 'x' >"$DOCROOT/index.html"
printf '#!/bin/sh\nprintf '\''Content-Type: text/plain\\n\\n'\''\necho '\''Hello World!'\''\n' >"$WORKDIR/cgi/hello"
chmod 0755 "$WORKDIR/cgi/hello"
# --cgi-max at least the most connections a run holds (the mixed run's 50
# included), so that every request runs a script, as before the limit
# (default 64) existed: a 503 beyond it would be a cheaper request.
CGI_MAX=50
for c in $CONNS; do ((c > CGI_MAX)) && CGI_MAX=$c; done
SERVER_FLAGS=(--cgi-dir "$WORKDIR/cgi" --cgi-max "$CGI_MAX")

BIN=${BIN:-}
if [[ -z $BIN ]]; then
	BIN=$WORKDIR/server
	log "building $BIN"
	go build -o "$BIN" ./cmd/server || die "go build ./cmd/server failed"
fi

CSV=$RESULTS_DIR/summary.csv
"$WRKPARSE" header cgi >"$CSV"

# bench BACKEND LOAD CONNS PATH: one wrk run into raw/, one CSV row. A
# run alone is metered (scripts/lib.sh meter_stop: the CGI scripts' CPU
# is in the machine's figure, not in the server's); the two runs of a
# mixed cell share the machine, and leave those columns empty.
bench() {
	local raw=$RESULTS_DIR/raw/$1-${2/: /-}-c$3.txt req cols=(backend="$1" load="$2" conns="$3")
	[[ $2 == mixed* ]] || meter_start "${SERVER_PIDS[@]}"
	run_wrk "$raw" "$3" keepalive "$4" "$DURATION"
	if [[ $2 != mixed* ]]; then
		req=$(wrk_field "$raw" requests) || req=0
		meter_stop "$req"
		cols+=("${METER_COLS[@]}")
	fi
	"$WRKPARSE" row cgi "$raw" "${cols[@]}" >>"$CSV" || "$WRKPARSE" row cgi - "${cols[@]}" >>"$CSV"
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
NOTES=()
for be in epoll uring; do
	if ! start_server "$be" "$LOOPS" "$ALL_CPUS"; then
		NOTES+=("- $be skipped: $(grep -m1 -v '^server: serving' "$SERVER_LOG" | sed 's/^server: //')")
		log "$be skipped"
		continue
	fi
	log "$be on port $SERVER_PORT"
	bench "$be" static 10 /
	for c in $CONNS; do
		bench "$be" cgi "$c" /cgi-bin/hello
		sleep 1 # the scripts of connections wrk left open are killed and reaped
	done
	# mixed: CGI load and static clients at once, on the same loops.
	bench "$be" "mixed: cgi" 50 /cgi-bin/hello &
	bg=$!
	BENCH_PIDS+=("$bg")
	bench "$be" "mixed: static" 10 /
	wait "$bg"
	forget "$bg"
	stop_server
	cp "$SERVER_LOG" "$RESULTS_DIR/raw/$be-server.log"
	NOTES+=("- $be counters at exit: $(counters "$SERVER_LOG")")
done

{
	env_header
	echo "load average at start (1, 5, 15 min): $LOADAVG"
	loadavg end
	echo "run: DURATION=$DURATION CONNS=\"$CONNS\" LOOPS=$LOOPS, wrk -t1 unpinned, server --loops $LOOPS"
} >"$RESULTS_DIR/env.txt"

{
	echo "# CGI hello world under wrk"
	echo
	echo "\`scripts/cgi-bench.sh\` ($(date -u +%F)). Each request forks and execs \`/bin/sh\` for a"
	echo "two-line script; the loops never wait for it (the script's stdout is one more fd"
	echo "in the event loop). Latency in µs; each row is a row of summary.csv."
	echo
	echo '```'
	cat "$RESULTS_DIR/env.txt"
	echo '```'
	echo
	echo "| backend | requests | conns | req/s | p50 µs | p99 µs | socket errors | non-2xx | server CPU-µs/req | machine CPU-µs/req |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
	tail -n +2 "$CSV" | while IFS=, read -r b load c rps p50 p99 err non cpu machine _; do
		echo "| $b | $load | $c | ${rps%.*} | $p50 | $p99 | $err | $non | $cpu | $machine |"
	done
	echo
	printf '%s\n' "${NOTES[@]}"
} >"$RESULTS_DIR/summary.md"
DONE=1
cat "$RESULTS_DIR/summary.md"
