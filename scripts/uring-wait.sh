#!/usr/bin/env bash
# uring-wait.sh measures what io_uring's --uring-wait modes cost the
# server's other goroutines: a raw wait (RawSyscall6) keeps the loop's P,
# so CGI scripts' goroutines (fork, stdin, reap), the --metrics HTTP
# server and the signal handler may wait for it. Into
# results/YYYY-MM-DD_<commit>_uring-wait/ (summary.md, summary.csv,
# env.txt, raw/).
#
#   scripts/uring-wait.sh     MODES="block batch raw" ROUNDS=3 to change
#
# Placements (PLACES):
#   pinned   the server on CPU 0 only: GOMAXPROCS 1, --loops 1 (every P
#            is the loop's)
#   loops1   the server on CPUs 0-1: GOMAXPROCS 2, --loops 1 (a P spare)
#   loops2   the server on CPUs 0-1: GOMAXPROCS 2, --loops 2 (every P a
#            loop's)
# wrk runs on CPU 1 (beside the server in loops1 and loops2).
#
# Per placement, mode and round, a fresh server (--cgi-dir with a
# two-line #!/bin/sh script, --metrics) and:
#   cgi      wrk -t1 -c4 on /cgi-bin/hello alone for DURATION s
#   mixed    wrk -t1 -c50 keep-alive on the 1500 B page for DURATION s,
#            and beside it wrk -t1 -c4 on the CGI script and SCRAPES
#            sequential GETs of /metrics (curl's time_total each)
#   sigterm  under the same static load, SIGTERM, and the time until the
#            process has exited (bash's wait on it)
# Medians over ROUNDS; the modes are interleaved within each round.
#
# Only 127.0.0.1 is used; only processes started here are signalled.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPTS=$ROOT/scripts
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"
help_only "$@"

MODES=${MODES:-block batch raw}
PLACES=${PLACES:-pinned loops1 loops2}
ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-3} SCRAPES=${SCRAPES:-40}
PORT_NEXT=${BENCH_PORT:-18200}
WRK_CPU=1
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v curl >/dev/null || missing+=(curl)
((${#missing[@]})) && { apt_install "${missing[@]}" || die "apt-get install ${missing[*]} failed"; }

lab_setup uring-wait
cd "$ROOT" || die "cannot cd to $ROOT"
build_wrkparse
if [[ -z ${BIN:-} ]]; then
	BIN=$WORKDIR/server
	go build -o "$BIN" ./cmd/server || die "go build ./cmd/server failed"
fi
DOCROOT=$WORKDIR/www
make_docroot "$DOCROOT"
mkdir -p "$WORKDIR/cgi"
printf '#!/bin/sh\nprintf '\''Content-Type: text/plain\\n\\n'\''\necho '\''Hello World!'\''\n' >"$WORKDIR/cgi/hello"
chmod 0755 "$WORKDIR/cgi/hello"

COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo nocommit)
OUT=${RESULTS:-$ROOT/results}/$(date +%F)_${COMMIT}_uring-wait
n=2
while [[ -e $OUT ]]; do
	OUT=${RESULTS:-$ROOT/results}/$(date +%F)_${COMMIT}_uring-wait-$n
	n=$((n + 1))
done
mkdir -p "$OUT/raw"
CSV=$OUT/summary.csv
echo "place,mode,round,cgi_rps,cgi_p50_us,cgi_p99_us,mixed_static_rps,mixed_cgi_rps,mixed_cgi_p99_us,scrape_p50_us,scrape_p99_us,scrape_max_us,sigterm_ms,errors" >"$CSV"
{
	env_header
	echo "load average at start (1, 5, 15 min): $LOADAVG"
	echo "run: MODES=\"$MODES\" PLACES=\"$PLACES\" ROUNDS=$ROUNDS DURATION=$DURATION SCRAPES=$SCRAPES"
} >"$OUT/env.txt"
log "results go to $OUT"

# scrape PORT N OUT: N sequential GETs of /metrics, 25 ms apart; each
# one's time_total in µs, one a line, into OUT (000000 = failed).
scrape() {
	local i
	for ((i = 0; i < $2; i++)); do
		taskset -c "$WRK_CPU" curl -s -o /dev/null -m 5 -w '%{time_total}\n' "http://$BENCH_HOST:$1/metrics" ||
			echo fail
		sleep 0.025
	done | awk '{ if ($1 == "fail") print "fail"; else printf "%d\n", $1 * 1e6 }' >"$3"
}

# pct FILE P: the P-th percentile (nearest rank) of the numbers in FILE.
pct() {
	grep -v fail "$1" | sort -n | awk -v p="$2" '{ v[NR] = $1 } END { if (NR) { i = int(NR * p / 100 + 0.999); if (i < 1) i = 1; print v[i] } }'
}

# cell PLACE MODE ROUND: the three measurements on one fresh server.
cell() {
	local place=$1 mode=$2 r=$3 cpus=0-1 loops=1 raw mport bg sp t0 t1 errs=0
	case $place in
	pinned) cpus=0 ;;
	loops2) loops=2 ;;
	esac
	raw=$OUT/raw/$place-$mode-r$r
	mport=$(next_port)
	PORT_NEXT=$((mport + 1)) # next_port ran in a subshell
	SERVER_FLAGS=(--cgi-dir "$WORKDIR/cgi" --metrics "$BENCH_HOST:$mport" --uring-wait="$mode")
	start_server uring "$loops" "$cpus" || die "uring did not start"
	wait_listening "$SERVER_PID" "$mport" || die "no metrics listener"
	# cgi alone
	run_wrk "$raw-cgi.txt" 4 keepalive /cgi-bin/hello "$DURATION"
	sleep 0.5
	# mixed: static load, CGI and scrapes beside it
	run_wrk "$raw-mixed-static.txt" 50 keepalive / "$DURATION" &
	bg=$!
	sleep 0.3
	run_wrk "$raw-mixed-cgi.txt" 4 keepalive /cgi-bin/hello "$((DURATION - 1))" &
	sp=$!
	scrape "$mport" "$SCRAPES" "$raw-scrape.txt"
	wait "$sp" "$bg"
	sleep 0.5
	# sigterm under static load
	run_wrk "$raw-sigterm-static.txt" 50 keepalive / 2 &
	bg=$!
	sleep 1
	t0=$(date +%s%N)
	kill -TERM "$SERVER_PID"
	wait "$SERVER_PID"
	t1=$(date +%s%N)
	forget "$SERVER_PID"
	SERVER_PID=
	SERVER_PIDS=()
	wait "$bg"
	cp "$SERVER_LOG" "$raw-server.log"
	grep -q fail "$raw-scrape.txt" && errs=$((errs + $(grep -c fail "$raw-scrape.txt")))
	local f c_rps c_p50 c_p99 m_rps mc_rps mc_p99 e
	for f in "$raw-cgi.txt" "$raw-mixed-cgi.txt"; do
		e=$(wrk_field "$f" errors) && errs=$((errs + e))
	done
	c_rps=$(wrk_field "$raw-cgi.txt" rps) c_p50=$(wrk_field "$raw-cgi.txt" p50_us) c_p99=$(wrk_field "$raw-cgi.txt" p99_us)
	m_rps=$(wrk_field "$raw-mixed-static.txt" rps)
	mc_rps=$(wrk_field "$raw-mixed-cgi.txt" rps) mc_p99=$(wrk_field "$raw-mixed-cgi.txt" p99_us)
	echo "$place,$mode,$r,$c_rps,$c_p50,$c_p99,$m_rps,$mc_rps,$mc_p99,$(pct "$raw-scrape.txt" 50),$(pct "$raw-scrape.txt" 99),$(pct "$raw-scrape.txt" 100),$(((t1 - t0) / 1000000)),$errs" >>"$CSV"
	log "$place $mode r$r: $(tail -1 "$CSV")"
}

for ((r = 1; r <= ROUNDS; r++)); do
	for place in $PLACES; do
		for mode in $MODES; do
			cell "$place" "$mode" "$r"
		done
	done
done

# medians per place and mode
{
	echo "# What --uring-wait costs the server's other goroutines"
	echo
	echo "\`scripts/uring-wait.sh\` (its header says what each column is). Medians of $ROUNDS"
	echo "interleaved rounds; latencies in µs, SIGTERM to exit in ms."
	echo
	echo '```'
	cat "$OUT/env.txt"
	echo '```'
	echo
	echo "| placement | --uring-wait | CGI alone req/s | p50 | p99 | static beside req/s | CGI beside req/s | CGI beside p99 | /metrics p50 | p99 | max | SIGTERM→exit ms | errors (all rounds) |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	for place in $PLACES; do
		for mode in $MODES; do
			awk -F, -v p="$place" -v m="$mode" '
			function med(col,   n, i, j, t, a) { n = 0
				for (i = 1; i <= rows; i++) a[++n] = v[i, col]
				for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
				return n ? a[int((n + 1) / 2)] : "" }
			NR > 1 && $1 == p && $2 == m { rows++; for (c = 4; c <= NF; c++) v[rows, c] = $c; errs += $NF }
			END { printf "| %s | %s | %d | %s | %s | %d | %d | %s | %s | %s | %s | %s | %d |\n", p, m,
				med(4), med(5), med(6), med(7), med(8), med(9), med(10), med(11), med(12), med(13), errs }' "$CSV"
		done
	done
} >"$OUT/summary.md"
DONE=1
cat "$OUT/summary.md"
