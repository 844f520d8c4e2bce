# shellcheck shell=bash
# lib.sh holds what the bash scripts left (machine setup and the
# measurements scripts/labrun does not make) share: the fixture docroot,
# starting and stopping the servers under test, running wrk, and reading
# counters. Source it; it runs nothing by itself.
#
# Every process started here is recorded in BENCH_PIDS and only those are
# ever signalled: bench_cleanup (installed by bench_traps) kills what is
# still alive on EXIT, INT and TERM, so a failed or interrupted run leaves
# no server behind. Everything listens on and connects to 127.0.0.1 only.

BENCH_HOST=127.0.0.1
BENCH_PIDS=()          # processes we started and have not reaped yet
SERVER_FLAGS=()        # more twinloop flags for start_server
PORT_NEXT=${BENCH_PORT:-18080}
# shellcheck disable=SC2034 # for bench.sh
CLK_TCK=$(getconf CLK_TCK)
# giouring links only with this flag (README); a caller's GOFLAGS wins.
export GOFLAGS=${GOFLAGS:--ldflags=-checklinkname=0}
# Binaries linked static, as `make build` links the server: nothing here
# needs cgo (no user or DNS lookups), and a dynamic binary maps libc and
# the loader into every process, 1.5 MB of RSS
# (results/2026-12-02_b966187_c10k-rss). The race detector needs cgo:
# scripts/test.sh does not source this file.
export CGO_ENABLED=${CGO_ENABLED:-0}

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# usage prints the header comment of the script that sourced this file,
# up to its `set -uo` line.
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

# env_header prints the lines every results folder's env.txt begins with:
# when, which commit (and what the work tree changes beside it), and the
# machine. The caller adds what its own run needs.
env_header() {
	local changed
	mapfile -t changed < <(git -C "$ROOT" status --porcelain -- . ':!results' 2>/dev/null | cut -c4-)
	echo "date: $(date -Is)"
	echo "commit: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null) (${#changed[@]} files changed in the work tree)"
	if ((${#changed[@]})); then echo "changed: ${changed[*]:0:30}"; fi
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
	echo "cores: $(nproc)"
	echo "memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "kernel: $(uname -srm)"
	echo "mitigations: $(mitigations)"
	vulnerabilities
	echo "go: $(go version)"
}

# vulnerabilities prints one line per file of
# /sys/devices/system/cpu/vulnerabilities, "Not affected" included, so that
# env.txt says in full what this CPU and kernel pay on each kernel entry.
vulnerabilities() {
	local f
	for f in /sys/devices/system/cpu/vulnerabilities/*; do
		[ -r "$f" ] && echo "vulnerability $(basename "$f"): $(<"$f")"
	done
}

# loadavg WHEN: env.txt's line for the load average at WHEN (start, end).
# Other sessions' tests share these machines: a whole-machine figure is
# only as quiet as this says.
loadavg() {
	echo "load average at $1 (1, 5, 15 min): $(cut -d' ' -f1-3 /proc/loadavg)"
}

# mitigations lists, on one line split by " | ", each CPU vulnerability the kernel does
# not call "Not affected", with its state: what every kernel entry pays
# differs between these machines (an EPYC without the SRSO microcode
# pays for Safe RET).
mitigations() {
	local f v out=()
	for f in /sys/devices/system/cpu/vulnerabilities/*; do
		[ -r "$f" ] || continue
		v=$(<"$f")
		[ "$v" = "Not affected" ] || out+=("$(basename "$f"): $v")
	done
	if ((${#out[@]} == 0)); then
		echo unknown
		return
	fi
	local first=1 e
	for e in "${out[@]}"; do
		((first)) || printf ' | '
		printf '%s' "$e"
		first=0
	done
	echo
}

# help_flag ARG: prints the usage and exits when ARG is -h or --help, for
# scripts whose arguments are positional (help_only refuses those).
help_flag() {
	case ${1:-} in
	-h | --help)
		usage
		exit 0
		;;
	esac
}

# need CMD[:PACKAGE]...: installs (apt_install) the Debian packages of the
# commands that are missing; PACKAGE is CMD's unless given.
need() {
	local c pkgs=()
	for c in "$@"; do
		command -v "${c%%:*}" >/dev/null || pkgs+=("${c#*:}")
	done
	((${#pkgs[@]})) || return 0
	mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
	apt_install "${pkgs[@]}" || die "apt-get install ${pkgs[*]} failed"
}

# forget PID drops a reaped process from BENCH_PIDS, so that cleanup never
# signals a PID the kernel may have given to someone else since.
forget() {
	local p keep=()
	for p in "${BENCH_PIDS[@]}"; do
		[[ $p == "$1" ]] || keep+=("$p")
	done
	BENCH_PIDS=("${keep[@]}")
}

# reap PID [SECONDS]: wait for a process we signalled, SIGKILL it after
# SECONDS (default 10), and forget it.
reap() {
	local pid=$1 limit=${2:-10} i
	for ((i = 0; i < limit * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "pid $pid did not stop in ${limit}s; SIGKILL"
		kill -KILL "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	forget "$pid"
}

bench_cleanup() {
	local p
	((${#BENCH_PIDS[@]})) || return 0
	log "cleanup: stopping pids ${BENCH_PIDS[*]}"
	for p in "${BENCH_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${BENCH_PIDS[@]}"; do
		reap "$p" 5
	done
}

bench_traps() {
	trap bench_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}

# apt_install PKG...: installs what is missing. nginx's Debian package
# starts a system nginx on port 80 unless policy-rc.d says no; we say no
# for the duration of the install when no policy is set already.
apt_install() {
	local policy=/usr/sbin/policy-rc.d made=0 rc
	log "installing $* with apt-get"
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 0755 "$policy" && made=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
	rc=$?
	((made)) && rm -f "$policy"
	return $rc
}

# lab_setup NAME: a fresh WORKDIR under /tmp, removed on exit with every
# process still running; a run that stops before DONE=1 says so in
# $OUT/env.txt (OUT is the results folder, once the caller has made it).
lab_setup() {
	WORKDIR=$(mktemp -d "/tmp/twinloop-$1.XXXXXX")
	# nginx's workers run as nobody when the master is root: mktemp's
	# 0700 made every nginx response a 403 page (c10k-mem.sh's nginx
	# cells measured 153-byte error pages until 2026-12-01_uring-c10k).
	chmod 0755 "$WORKDIR"
	bench_traps
	OUT='' DONE=0
	trap lab_exit EXIT
}

lab_exit() {
	bench_cleanup
	rm -rf "$WORKDIR"
	if [[ -n $OUT && -d $OUT ]] && ((!DONE)); then
		echo "status: incomplete: stopped early at $(date -Is)" >>"$OUT/env.txt"
		log "stopped early; what was measured is in $OUT"
	fi
}

# raise_nofile N: 10000 connections need more descriptors than the usual
# 1024 soft limit, in wrk and in the servers (which inherit it).
raise_nofile() {
	local want=$1
	if ! ulimit -n "$want" 2>/dev/null; then
		ulimit -Hn "$want" 2>/dev/null # root may raise the hard limit too
		ulimit -n "$want" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
	fi
}

# make_docroot DIR: the fixture files. index.html is exactly 1500 bytes
# (one Ethernet MTU of payload, the classic small page); 64k.html is
# 65536 bytes, twinloop's --mem-body-max, the largest body it keeps in
# memory; 1m.html is 1 MiB, sent from the file. The .html suffix keeps
# Go's FileServer from sniffing the content (an extra read per request).
make_docroot() {
	local dir=$1 line
	mkdir -p "$dir"
	line='<p>twinloop benchmark fixture: the quick brown fox jumps over the lazy dog.</p>'
	{
		printf '<!doctype html>\n<title>bench</title>\n'
		while :; do printf '%s\n' "$line"; done
	} | head -c 1500 >"$dir/index.html"
	yes "$line" | head -c 65536 >"$dir/64k.html"
	yes "$line" | head -c 1048576 >"$dir/1m.html"
	# nginx's workers run as nobody when the master is root; mktemp -d is 0700.
	chmod 0755 "$dir"
	chmod 0644 "$dir"/*.html
}

# port_free PORT: nothing accepts connections on 127.0.0.1:PORT.
port_free() {
	! (exec 3<>"/dev/tcp/$BENCH_HOST/$1") 2>/dev/null
}

next_port() {
	while ! port_free "$PORT_NEXT"; do
		PORT_NEXT=$((PORT_NEXT + 1))
	done
	echo "$PORT_NEXT"
	PORT_NEXT=$((PORT_NEXT + 1))
}

# wait_listening PID PORT: until PORT accepts connections (0), or PID
# exits or 10 s pass (1).
wait_listening() {
	local pid=$1 port=$2 i
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || return 1
		port_free "$port" || return 0
		sleep 0.1
	done
	return 1
}

# nginx_conf DIR WORKERS PORT DOCROOT: a config like a tuned static-file
# nginx, everything it writes kept under DIR. NGINX_HTTP_EXTRA, if set, is
# more directives for its http block (make cold's `aio threads;`).
nginx_conf() {
	local dir=$1 workers=$2 port=$3 docroot=$4 nofile conns
	mkdir -p "$dir/tmp"
	# As many descriptors as this shell has (raise_nofile): asking for more
	# fails where the sandbox forbids raising the hard limit.
	nofile=$(ulimit -n)
	conns=$((nofile - 100 < 20000 ? nofile - 100 : 20000))
	cat >"$dir/nginx.conf" <<EOF
# Generated by scripts/lib.sh for one benchmark run.
daemon off;
master_process on;
worker_processes $workers;
worker_rlimit_nofile $nofile;
pid $dir/nginx.pid;
error_log $dir/error.log warn;

events {
    worker_connections $conns;
    use epoll;
}

http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    open_file_cache max=1000 inactive=60s;
    open_file_cache_valid 60s;
    ${NGINX_HTTP_EXTRA:-}
    types { text/html html; }
    default_type application/octet-stream;
    client_body_temp_path $dir/tmp/client_body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;

    server {
        # backlog as twinloop's listen.Backlog (the kernel caps both at somaxconn)
        listen $BENCH_HOST:$port reuseport backlog=4096;
        root $docroot;
        location / { }
    }
}
EOF
}

# start_server KIND LOOPS CPUS: starts one server under test pinned to
# CPUS (a taskset list) and waits until it listens. KIND is epoll, uring,
# blocking, nginx, gohttp, gnet or fasthttp; LOOPS is --loops, nginx's
# worker_processes, gnet's event loops, or ignored for gohttp and fasthttp
# (their GOMAXPROCS is the number of CPUS). twinloop gets the flags in the
# array SERVER_FLAGS too, if set (make ladder's steps). Needs BIN, GOHTTP,
# PEERS (scripts/peers, for gnet and fasthttp), DOCROOT and WORKDIR. Sets SERVER_PID (the process to stop), SERVER_PIDS
# (the processes whose CPU time counts: nginx's master and workers),
# SERVER_PORT, SERVER_LOG. Returns 1, with the log on stderr, if the
# server does not come up.
# shellcheck disable=SC2153 # DOCROOT is the caller's
start_server() {
	local kind=$1 loops=$2 cpus=$3 i dir workers=()
	SERVER_PORT=$(next_port)
	SERVER_LOG="$WORKDIR/logs/$kind-$loops-$SERVER_PORT.log"
	mkdir -p "$WORKDIR/logs"
	case $kind in
	epoll | uring | blocking)
		# --stats makes the counters readable while it runs (tl_counters).
		taskset -c "$cpus" "$BIN" --backend="$kind" --loops "$loops" \
			--listen "$BENCH_HOST:$SERVER_PORT" --dir "$DOCROOT" --stats 100ms \
			"${SERVER_FLAGS[@]}" >/dev/null 2>"$SERVER_LOG" &
		;;
	gnet | fasthttp)
		taskset -c "$cpus" "$PEERS" -server "$kind" -loops "$loops" \
			-listen "$BENCH_HOST:$SERVER_PORT" -dir "$DOCROOT" >"$SERVER_LOG" 2>&1 &
		;;
	nginx)
		dir="$WORKDIR/nginx-$SERVER_PORT"
		nginx_conf "$dir" "$loops" "$SERVER_PORT" "$DOCROOT"
		taskset -c "$cpus" nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" \
			>"$SERVER_LOG" 2>&1 &
		;;
	gohttp)
		taskset -c "$cpus" "$GOHTTP" -listen "$BENCH_HOST:$SERVER_PORT" -dir "$DOCROOT" \
			>"$SERVER_LOG" 2>&1 &
		;;
	*) die "unknown server kind $kind" ;;
	esac
	SERVER_PID=$!
	BENCH_PIDS+=("$SERVER_PID")
	SERVER_PIDS=("$SERVER_PID")
	if ! wait_listening "$SERVER_PID" "$SERVER_PORT"; then
		log "$kind did not start; its log:"
		sed 's/^/    /' "$SERVER_LOG" >&2
		[[ $kind == nginx ]] && sed 's/^/    /' "$dir/error.log" >&2 2>/dev/null
		stop_server
		return 1
	fi
	if [[ $kind == nginx ]]; then
		# The master forks its workers before or just after it listens.
		for ((i = 0; i < 50; i++)); do
			mapfile -t workers < <(pgrep -P "$SERVER_PID")
			((${#workers[@]} >= loops)) && break
			sleep 0.1
		done
		SERVER_PIDS+=("${workers[@]}")
		BENCH_PIDS+=("${workers[@]}")
	fi
	return 0
}

# stop_server: SIGTERM (twinloop prints its summary, nginx stops its
# workers, gohttp shuts down) and wait.
stop_server() {
	local p
	[[ -n ${SERVER_PID:-} ]] || return 0
	kill -TERM "$SERVER_PID" 2>/dev/null
	reap "$SERVER_PID" 10
	for p in "${SERVER_PIDS[@]:1}"; do
		reap "$p" 5
	done
	SERVER_PID=
	SERVER_PIDS=()
}

# cpu_ticks PID...: utime+stime of the processes (all their threads), in
# clock ticks, from /proc/PID/stat fields 14 and 15.
cpu_ticks() {
	local p s total=0 f
	for p in "$@"; do
		s=$(<"/proc/$p/stat") || continue
		s=${s##*) } # the command name may hold spaces and parentheses
		read -ra f <<<"$s"
		total=$((total + f[11] + f[12]))
	done
	echo "$total"
}

# --- the load generator's CPU ------------------------------------------------
# The measure of a run (the server's, the whole machine's, softirq's and
# the load generator's CPU per request, the quiet gate) is scripts/labrun's
# (meter.go); what is left here times a script's own load generator.

# child_ticks sets CHILD_TICKS to the CPU time (utime + stime, clock ticks)
# of the children this shell has reaped: cutime + cstime of
# /proc/$BASHPID/stat, read without a fork (a fork would be a child of its
# own). Read around the wait for one load generator, it is that
# generator's CPU (run_client).
child_ticks() {
	local stat fields
	read -r stat <"/proc/$BASHPID/stat"
	stat=${stat##*) } # the command name may hold spaces and parentheses
	read -ra fields <<<"$stat"
	CHILD_TICKS=$((fields[13] + fields[14]))
}

# run_client OUT CMD...: runs the load generator CMD pinned to WRK_CPU,
# its output into OUT, in the background so that a signal to the script
# is handled at once; CLIENT_TICKS is then its CPU time.
run_client() {
	local report=$1 pid c0
	shift
	child_ticks
	c0=$CHILD_TICKS
	taskset -c "$WRK_CPU" "$@" >"$report" 2>&1 &
	pid=$!
	BENCH_PIDS+=("$pid")
	wait "$pid"
	forget "$pid"
	child_ticks
	CLIENT_TICKS=$((CHILD_TICKS - c0))
}

# peak_rss_kb PID...: the processes' peak resident set (VmHWM), summed, in
# kB: nginx's master and workers together, as their CPU time is.
peak_rss_kb() {
	local p total=0 kb
	for p in "$@"; do
		kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
		total=$((total + ${kb:-0}))
	done
	echo "$total"
}

# quiesce PID...: waits (up to 3 s) until the processes stop using CPU,
# so that a run's leftovers (a backlog of connections wrk gave up on,
# closes) are not charged to the next run.
quiesce() {
	local prev cur i
	prev=$(cpu_ticks "$@")
	for ((i = 0; i < 30; i++)); do
		sleep 0.1
		cur=$(cpu_ticks "$@")
		((cur == prev)) && return 0
		prev=$cur
	done
}

# run_wrk OUT CONNS MODE PATH SECONDS: wrk -t1 pinned to WRK_CPU against
# the running server (run_client: CLIENT_TICKS is its CPU); MODE is
# keepalive, close (Connection: close) or pipeline16 (scripts/pipeline.lua,
# 16 requests per write). Its output goes to OUT.
run_wrk() {
	local out=$1 conns=$2 mode=$3 path=$4 secs=$5 args=()
	args=(-t1 -c"$conns" -d"${secs}s" --timeout 10s --latency)
	case $mode in
	keepalive) ;;
	close) args+=(-H 'Connection: close') ;;
	pipeline16) args+=(-s "$SCRIPTS/pipeline.lua") ;;
	*) die "unknown mode $mode" ;;
	esac
	args+=("http://$BENCH_HOST:$SERVER_PORT$path")
	[[ $mode == pipeline16 ]] && args+=(-- 16 "$path")
	run_client "$out" wrk "${args[@]}"
}

# build_wrkparse: builds scripts/wrkparse into WORKDIR as WRKPARSE. It is
# the lab's only reader of wrk reports and writer of summary.csv rows
# (the schemas in scripts/lab, which scripts/plot reads); run from ROOT.
# A WRKPARSE already built (exported to a script run by another) is kept.
build_wrkparse() {
	[[ -n ${WRKPARSE:-} && -x $WRKPARSE ]] && return 0
	WRKPARSE=$WORKDIR/wrkparse
	go build -o "$WRKPARSE" ./scripts/wrkparse || die "go build ./scripts/wrkparse failed"
	export WRKPARSE
}

# wrk_field FILE NAME...: numbers from wrk's report, space-separated.
# NAME is requests, rps, p50_us, p99_us, max_us (whole µs, empty when wrk
# had no sample), errors (connect+read+write+timeout) or non2xx (wrk's
# "Non-2xx or 3xx responses"). Fails when wrk did not finish its report.
# With several NAMEs, read them with read -r only when none can be empty.
wrk_field() {
	"$WRKPARSE" field "$@"
}

# tl_counters: twinloop's last "server: stats" line, as "key=value ...".
tl_counters() {
	tac "$SERVER_LOG" | grep -m1 '^server: stats ' | sed 's/^server: stats //'
}

# kv LINE KEY: the value of KEY in a "key=value ..." line, 0 if absent.
kv() {
	local w
	for w in $1; do
		[[ ${w%%=*} == "$2" ]] && { echo "${w#*=}"; return; }
	done
	echo 0
}

# div A B [FORMAT]: A/B with awk, empty when B is 0.
div() {
	awk -v a="$1" -v b="$2" -v f="${3:-%.2f}" 'BEGIN { if (b + 0 != 0) printf f "\n", a / b }'
}
