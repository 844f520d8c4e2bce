#!/usr/bin/env bash
# syscalls.sh shows which system calls a server makes per request: it runs
# wrk for a few seconds with the server under `strace -c -f -p PID` and
# prints strace's per-syscall counts divided by the requests wrk completed,
# as a Markdown table. For twinloop (epoll, uring, blocking) its own counters over
# the same window stand beside strace's, as a cross-check: they should
# agree on every call the loop makes, and what only strace sees (futex,
# nanosleep, madvise, ...) is the Go runtime's.
#
#   scripts/syscalls.sh BACKEND WORKLOAD [SECONDS]
#
# BACKEND is epoll, uring, blocking, nginx (1 worker), gohttp, gnet or
# fasthttp (scripts/peers); WORKLOAD is
# keepalive or close (Connection: close); SECONDS defaults to 3.
# One loop or worker, pinned to CPU 0; wrk -t1 -c50 on CPU 1.
#
# Environment (bench.sh sets these; alone, the script makes its own):
# BIN (default ./bin/server, built if missing), GOHTTP, PEERS, DOCROOT, WORKDIR,
# CONNS (50), SIZE (1500, 64k or 1m), SERVER_CPU (0), WRK_CPU (1),
# BENCH_PORT. Only 127.0.0.1 is used; only processes started here are
# signalled, and none is left running.
#
# strace stops the server at every call, so it runs several times slower
# and batches differently (more events per epoll_wait); read the table
# for which calls a request costs, and bench.sh's summary.csv for how many
# an unobserved run makes.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPTS=$ROOT/scripts
# shellcheck source=scripts/lib.sh
. "$SCRIPTS/lib.sh"

if (($# < 2)) || [[ $1 == -h || $1 == --help ]]; then
	usage >&2
	exit 2
fi
BACKEND=$1 WORKLOAD=$2 SECONDS_=${3:-3}
case $BACKEND in epoll | uring | poll | blocking | nginx | gohttp | gnet | fasthttp) ;; *) die "unknown backend $BACKEND (epoll, uring, poll, blocking, nginx, gohttp, gnet, fasthttp)" ;; esac
case $WORKLOAD in keepalive | close) ;; *) die "unknown workload $WORKLOAD (keepalive, close)" ;; esac
CONNS=${CONNS:-50} SIZE=${SIZE:-1500}
SERVER_CPU=${SERVER_CPU:-0}
WRK_CPU=${WRK_CPU:-$(($(nproc) > 1 ? 1 : 0))}
command -v strace >/dev/null || die "strace is not installed (apt-get install strace)"
command -v wrk >/dev/null || die "wrk is not installed (apt-get install wrk)"

bench_traps
own_workdir=0
if [[ -z ${WORKDIR:-} ]]; then
	WORKDIR=$(mktemp -d /tmp/twinloop-syscalls.XXXXXX)
	chmod 0755 "$WORKDIR"
	# shellcheck disable=SC2034 # read by the EXIT trap
	own_workdir=1
fi
trap 'bench_cleanup; ((own_workdir)) && rm -rf "$WORKDIR"' EXIT
cd "$ROOT" || die "cannot cd to $ROOT"

case $BACKEND in
epoll | uring | poll | blocking)
	BIN=${BIN:-$ROOT/bin/server}
	if [[ ! -x $BIN ]]; then
		go build -o "$BIN" ./cmd/server || die "go build ./cmd/server failed"
	fi
	;;
gohttp)
	if [[ -z ${GOHTTP:-} ]]; then
		GOHTTP=$WORKDIR/gohttp
		go build -o "$GOHTTP" ./scripts/gohttp || die "go build ./scripts/gohttp failed"
	fi
	;;
gnet | fasthttp)
	if [[ -z ${PEERS:-} ]]; then
		PEERS=$WORKDIR/peers
		(cd scripts/peers && go build -o "$PEERS" .) || die "go build in scripts/peers failed"
	fi
	;;
esac
build_wrkparse
if [[ -z ${DOCROOT:-} ]]; then
	DOCROOT=$WORKDIR/www
	make_docroot "$DOCROOT"
fi
raise_nofile 65536

path=$(url_path "$SIZE")
start_server "$BACKEND" 1 "$SERVER_CPU" || die "$BACKEND did not start"
# No warm-up: the table is for which calls a request makes, and setting up
# the connections (c=50) and the first open of the file are part of the
# run, as they are of strace's count.
twinloop=0 before=
if [[ $BACKEND == epoll || $BACKEND == uring || $BACKEND == blocking ]]; then
	twinloop=1
	for ((i = 0; i < 10; i++)); do
		before=$(tl_counters) && [[ -n $before ]] && break
		sleep 0.1
	done
fi

strace_out=$WORKDIR/strace-$BACKEND-$WORKLOAD.txt
wrk_out=$WORKDIR/wrk-$BACKEND-$WORKLOAD.txt
sys_attach strace "$strace_out" "${SERVER_PIDS[@]}"
run_wrk "$wrk_out" "$CONNS" "$WORKLOAD" "$path" "$SECONDS_"
sys_detach
req=$(wrk_field "$wrk_out" requests) || die "wrk failed: $(cat "$wrk_out")"
counters=$WORKDIR/counters-$BACKEND-$WORKLOAD.txt
: >"$counters"
if ((twinloop)); then
	after=$(tl_settle "$(($(kv "$before" requests) + req))")
	server_req=$(($(kv "$after" requests) - $(kv "$before" requests)))
	# The counters' names are strace's (core.Sys), but for pread (pread64).
	for w in $after; do
		k=${w%%=*}
		case $k in
		read | write | writev | sendto | recvfrom | sendfile | splice | epoll_wait | epoll_ctl | accept4 | close | \
			shutdown | setsockopt | getsockopt | getpeername | getsockname | ppoll | fcntl | pipe2 | kill | \
			mmap | munmap | io_uring_enter | openat2 | fstat | pread | getdents64)
			n=$(($(kv "$after" "$k") - $(kv "$before" "$k")))
			[[ $k == pread ]] && k=pread64
			echo "$k $n" >>"$counters"
			;;
		esac
	done
	sqes=$(($(kv "$after" sqes) - $(kv "$before" sqes)))
	cqes=$(($(kv "$after" cqes) - $(kv "$before" cqes)))
fi
stop_server

mode_desc="keep-alive"
[[ $WORKLOAD == close ]] && mode_desc="Connection: close"
echo "## $BACKEND, $mode_desc"
echo
printf 'wrk -t1 -c%s -d%ss, %s: %s requests, %s req/s under strace.' \
	"$CONNS" "$SECONDS_" "$path" "$req" "$(wrk_field "$wrk_out" rps)"
((twinloop)) && printf ' The server counted %s requests.' "$server_req"
printf '\n\n'
strace_table "$strace_out" |
	awk -v req="$req" -v tl="$twinloop" -v counters="$counters" '
	# Rows: the names strace gives; a counter joins the row of its name, or of
	# the call this kernel and libc make for it (fstat may be newfstatat).
	function row(k) {
		if (!(k in seen)) { seen[k] = 1; names[++n] = k }
	}
	{ row($1); s[$1] = $2 }
	END {
		while ((getline line < counters) > 0) {
			split(line, f, " ")
			k = f[1]
			if (k == "fstat" && !("fstat" in s) && ("newfstatat" in s)) k = "newfstatat"
			row(k); c[k] = f[2]; hc[k] = 1
		}
		for (i = 1; i <= n; i++) { sv[names[i]] = s[names[i]] + 0; cv[names[i]] = c[names[i]] + 0 }
		# sort by strace calls, then counter, descending (insertion sort: short lists)
		for (i = 2; i <= n; i++) {
			k = names[i]
			for (j = i - 1; j >= 1 && (sv[names[j]] < sv[k] || (sv[names[j]] == sv[k] && cv[names[j]] < cv[k])); j--)
				names[j + 1] = names[j]
			names[j + 1] = k
		}
		if (tl) {
			print "| syscall | strace calls | strace / req | twinloop counter | counter / req |"
			print "|---|---:|---:|---:|---:|"
		} else {
			print "| syscall | strace calls | strace / req |"
			print "|---|---:|---:|"
		}
		for (i = 1; i <= n; i++) {
			k = names[i]; ts += sv[k]; tc += cv[k]
			if (tl && (k in hc))
				printf "| %s | %d | %.3f | %d | %.3f |\n", k, sv[k], sv[k] / req, cv[k], cv[k] / req
			else if (tl)
				printf "| %s | %d | %.3f | | |\n", k, sv[k], sv[k] / req
			else
				printf "| %s | %d | %.3f |\n", k, sv[k], sv[k] / req
		}
		if (tl)
			printf "| **total** | %d | **%.2f** | %d | **%.2f** |\n", ts, ts / req, tc, tc / req
		else
			printf "| **total** | %d | **%.2f** |\n", ts, ts / req
	}'
if ((twinloop)) && ((sqes + cqes > 0)); then
	printf '| (io_uring SQEs submitted) | | | %d | %s |\n' "$sqes" "$(div "$sqes" "$req" %.3f)"
	printf '| (io_uring CQEs reaped) | | | %d | %s |\n' "$cqes" "$(div "$cqes" "$req" %.3f)"
fi
echo
