# shellcheck shell=bash
# lib.sh holds what bench.sh and syscalls.sh share: the fixture docroot,
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

# peer_versions prints the versions of the peers that scripts/peers
# builds (gnet, fasthttp), from its go.mod, one line each.
peer_versions() {
	awk '$1 ~ /\/gnet\// { print "gnet: " $2 } $1 ~ /\/fasthttp$/ { print "fasthttp: " $2 }' "$ROOT/scripts/peers/go.mod"
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

# help_only handles the one argument of a script that takes none:
# -h/--help prints its header, anything else is refused.
help_only() {
	case ${1:-} in
	-h | --help)
		usage
		exit 0
		;;
	"") ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
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

# quick_args ARG...: the arguments of a script whose only option is
# --quick (QUICK=1; QUICK from the environment otherwise, default 0), with
# -h/--help.
quick_args() {
	local arg
	QUICK=${QUICK:-0}
	for arg in "$@"; do
		case $arg in
		--quick) QUICK=1 ;;
		-h | --help)
			usage
			exit 0
			;;
		*) die "unknown argument $arg (see --help)" ;;
		esac
	done
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

# results_dir NAME: a new results folder RESULTS/NAME (NAME-2, NAME-3, ...
# when that is taken) with raw/ in it, as OUT.
results_dir() {
	local n=2
	OUT=$RESULTS/$1
	while [[ -e $OUT ]]; do
		OUT=$RESULTS/$1-$n
		n=$((n + 1))
	done
	mkdir -p "$OUT/raw"
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

# perf_attach ARGS...: perf ARGS -p <the server's processes> in the
# background, as ATTACH_PID (sys_detach stops it).
perf_attach() {
	perf "$@" -p "$(
		IFS=,
		echo "${SERVER_PIDS[*]}"
	)" >/dev/null 2>&1 &
	ATTACH_PID=$!
	BENCH_PIDS+=("$ATTACH_PID")
	sleep 0.3
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

# big_files DIR N MB PREFIX: N files of MB MiB of random bytes, DIR/PREFIX0.bin
# on, written and synced (so that drop_caches can evict them).
big_files() {
	local dir=$1 n=$2 mb=$3 prefix=$4 i
	log "writing $n files of $mb MiB"
	for ((i = 0; i < n; i++)); do
		head -c $((mb << 20)) /dev/urandom >"$dir/$prefix$i.bin"
	done
	sync
}

# gib_read FILE: the GiB wrk read ("..., 1.23GB read"; wrk's units are
# powers of 1024).
gib_read() {
	awk '/ read$/ { v = $(NF-1); u = v; sub(/[0-9.]+/, "", u); sub(/[A-Za-z]+$/, "", v)
		f = u == "GB" ? 1 : u == "MB" ? 1/1024 : u == "KB" ? 1/1048576 : u == "TB" ? 1024 : 1/1073741824
		printf "%.4f", v * f }' "$1"
}

# blkio_v1_throttle CG PATH IOPS BPS: makes the cgroup v1 blkio group CG,
# capping reads from the disk under PATH at IOPS reads/s and BPS bytes/s,
# and sets DEV to that disk's MAJ:MIN. A PID written to $CG/cgroup.procs
# is throttled; the caller removes CG (rmdir) when done.
blkio_v1_throttle() {
	local cg=$1 path=$2 iops=$3 bps=$4
	[[ -d /sys/fs/cgroup/blkio ]] || die "no cgroup v1 blkio hierarchy at /sys/fs/cgroup/blkio"
	DEV=$(lsblk -no MAJ:MIN "$(findmnt -no SOURCE --target "$path")" | head -1 | tr -d ' ')
	[[ -n $DEV ]] || die "cannot find the block device under $path"
	mkdir "$cg" || die "mkdir $cg failed"
	echo "$DEV $iops" >"$cg/blkio.throttle.read_iops_device" &&
		echo "$DEV $bps" >"$cg/blkio.throttle.read_bps_device" ||
		die "cannot set the blkio throttle on $DEV"
}

# url_path SIZE: the path asked for each fixture size. The small page is
# asked as "/", since Go's FileServer answers /index.html with a redirect
# to "./"; every server under test serves index.html for "/".
url_path() {
	case $1 in
	1500) echo / ;;
	64k) echo /64k.html ;;
	1m) echo /1m.html ;;
	*) die "unknown size $1 (1500, 64k or 1m)" ;;
	esac
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
	epoll | uring | poll | blocking)
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

# --- the measure of a run ---------------------------------------------------
# Every lab script measures a run the same way (issue 27): meter_start
# before the load generator starts, meter_stop REQUESTS after it has exited
# and the server is quiet (quiesce). Per request, it gives the server's
# own CPU, the whole machine's, softirq's, the load generator's, and the
# server's context switches. On loopback the server's receive path and its
# wake-ups run in softirq on the client's CPU, where the server's utime +
# stime misses them: the whole machine's figure is the one that compares
# backends (DESIGN.md "Measuring"), the server's the one that compares
# with older runs. The machine's figure counts everything that ran, other
# sessions' tests too: env.txt's load averages say how quiet it was.

# cpu_stat: "BUSY SOFTIRQ", clock ticks summed over every CPU's line of
# /proc/stat (cpu0, cpu1, ...). Busy is user + nice + system + irq +
# softirq; idle, iowait and steal (time the hypervisor ran someone else)
# are not.
cpu_stat() {
	awk '$1 ~ /^cpu[0-9]+$/ { busy += $2 + $3 + $4 + $7 + $8; si += $8 } END { print busy, si }' /proc/stat
}

# ctx_switches PID...: voluntary + involuntary context switches of every
# thread of the processes.
ctx_switches() {
	local p
	for p in "$@"; do
		cat /proc/"$p"/task/*/status 2>/dev/null
	done | awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ { n += $2 } END { print n + 0 }'
}

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

# quiet_wait: waits (up to QUIET_MAX seconds, default 120) until the
# machine is quiet, every CPU together busy under 5% of one CPU over half
# a second, before a run starts: whole-machine CPU counts every process,
# and another's build beside a run would be charged to the server. The
# server is idle then (quiesce). Logs how long it waited, if it did.
quiet_wait() {
	local b0 b1 waited=0 limit=$((${QUIET_MAX:-120} * 2))
	while ((waited < limit)); do
		read -r b0 _ < <(cpu_stat)
		sleep 0.5
		read -r b1 _ < <(cpu_stat)
		(((b1 - b0) * 100 < CLK_TCK * 5 / 2)) && break
		waited=$((waited + 1))
	done
	((waited)) && log "waited $((waited / 2)).$((waited % 2 * 5)) s for a quiet machine"
	return 0
}

# meter_start PID...: starts measuring a run of the server processes PID...
# once the machine is quiet (quiet_wait).
meter_start() {
	quiet_wait
	METER_PIDS=("$@")
	METER_T0=$(cpu_ticks "$@")
	METER_CS0=$(ctx_switches "$@")
	read -r METER_BUSY0 METER_SI0 < <(cpu_stat)
	CLIENT_TICKS=
}

# meter_stop REQUESTS [FORMAT]: ends it. Sets, per request (empty when
# REQUESTS is 0; µs as FORMAT, default %.2f): METER_CPU (the servers'
# utime + stime), METER_MACHINE (every CPU's busy time), METER_SOFTIRQ
# (every CPU's softirq time), METER_CLIENT (the load generator's,
# CLIENT_TICKS from run_client or run_wrk, empty if neither ran) and
# METER_CS (the servers' context switches); METER_TICKS, the servers' CPU
# in clock ticks; METER_OTHERS and METER_NOISY (other processes' CPU in
# ticks, and whether it spoiled the run); and METER_COLS, the per-request figures as summary.csv's
# column=value pairs.
meter_stop() {
	local req=$1 fmt=${2:-%.2f} t1 cs1 busy1 si1
	t1=$(cpu_ticks "${METER_PIDS[@]}")
	cs1=$(ctx_switches "${METER_PIDS[@]}")
	read -r busy1 si1 < <(cpu_stat)
	METER_TICKS=$((t1 - METER_T0))
	METER_CPU=$(ticks_per_req "$METER_TICKS" "$req" "$fmt")
	METER_MACHINE=$(ticks_per_req $((busy1 - METER_BUSY0)) "$req" "$fmt")
	METER_SOFTIRQ=$(ticks_per_req $((si1 - METER_SI0)) "$req" "$fmt")
	METER_CLIENT=
	[[ -n $CLIENT_TICKS ]] && METER_CLIENT=$(ticks_per_req "$CLIENT_TICKS" "$req" "$fmt")
	METER_CS=$(div $((cs1 - METER_CS0)) "$req" %.4f)
	# What neither the servers, the load generator nor softirq account
	# for: other processes' work (and the kernel's threads), which a quiet
	# machine keeps near zero. METER_NOISY is 1 when it passed 3% of the
	# machine's busy time: a run to do again (meter_noisy).
	METER_OTHERS=$((busy1 - METER_BUSY0 - METER_TICKS - ${CLIENT_TICKS:-0} - (si1 - METER_SI0)))
	METER_NOISY=0
	((METER_OTHERS * 100 > (busy1 - METER_BUSY0) * 3)) && METER_NOISY=1
	# shellcheck disable=SC2034 # for the callers
	METER_COLS=(cpu_us_per_req="$METER_CPU" machine_cpu_us_per_req="$METER_MACHINE"
		softirq_us_per_req="$METER_SOFTIRQ" client_cpu_us_per_req="$METER_CLIENT" cs_per_req="$METER_CS")
}

# ticks_per_req TICKS REQUESTS FORMAT: TICKS as µs per request.
ticks_per_req() {
	div "$(($1 * 1000000 / CLK_TCK))" "$2" "$3"
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

# build_server: the twinloop binary under test as BIN: the caller's BIN if
# set, else ROOT/bin/server built from the work tree; run from ROOT.
build_server() {
	if [[ -n ${BIN:-} ]]; then
		log "using BIN=$BIN"
	else
		BIN=$ROOT/bin/server
		log "building $BIN"
		go build -o "$BIN" ./cmd/server || die "go build ./cmd/server failed"
	fi
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

# tl_settle MIN_REQUESTS: waits until twinloop's published counters
# include everything up to now, and prints them. A loop publishes its
# counters when the wall-clock second changes, and an idle loop wakes
# every second, so the first publish after the next second boundary
# holds everything done before it; --stats 100ms prints it soon after.
# MIN_REQUESTS (what the server must have answered by now) guards that
# reasoning: we poll up to 3 s more until the line shows that many.
tl_settle() {
	local min=$1 now wait_ns line i
	now=$(date +%s%N)
	wait_ns=$((1000000000 - now % 1000000000 + 150000000))
	sleep "$((wait_ns / 1000000000)).$(printf '%09d' $((wait_ns % 1000000000)))"
	for ((i = 0; i < 30; i++)); do
		line=$(tl_counters)
		(($(kv "$line" requests) >= min)) && break
		sleep 0.1
	done
	echo "$line"
}

# perf_ok: whether perf can count syscalls here.
perf_ok() {
	command -v perf >/dev/null &&
		perf stat -e raw_syscalls:sys_enter -x, -o /dev/null true >/dev/null 2>&1
}

# sys_attach METHOD OUT PID...: starts counting the system calls of the
# processes (every thread) with perf (raw_syscalls:sys_enter, a counter in
# the kernel: cheap) or strace -c -f (a stop per syscall: slow, but it names
# them). sys_detach stops it; its report is then in OUT.
sys_attach() {
	local method=$1 out=$2 p args=()
	shift 2
	for p in "$@"; do
		args+=(-p "$p")
	done
	case $method in
	perf)
		perf stat -e raw_syscalls:sys_enter -x, -o "$out" -p "$(
			IFS=,
			echo "$*"
		)" >/dev/null 2>&1 &
		;;
	strace) strace -c -f -o "$out" "${args[@]}" >/dev/null 2>&1 & ;;
	*) die "unknown syscall counting method $method" ;;
	esac
	ATTACH_PID=$!
	BENCH_PIDS+=("$ATTACH_PID")
	# Neither says when it is attached; strace stops every thread first.
	if [[ $method == perf ]]; then sleep 0.3; else sleep 0.5; fi
}

sys_detach() {
	sleep 0.2 # the server's closes after wrk exits belong to the run
	kill -INT "$ATTACH_PID" 2>/dev/null
	reap "$ATTACH_PID" 30
}

# sys_total METHOD OUT: how many system calls the report counted.
sys_total() {
	case $1 in
	perf) awk -F, '$3 ~ /raw_syscalls:sys_enter/ { print $1 + 0; exit }' "$2" ;;
	strace) awk '$NF == "total" { print $4 + 0 }' "$2" ;;
	esac
}

# strace_table OUT: "name calls" for each syscall in an strace -c report.
strace_table() {
	awk '$1 ~ /^[0-9.]+$/ && $NF != "total" && NF >= 5 { print $NF, $4 }' "$1"
}

# div A B [FORMAT]: A/B with awk, empty when B is 0.
div() {
	awk -v a="$1" -v b="$2" -v f="${3:-%.2f}" 'BEGIN { if (b + 0 != 0) printf f "\n", a / b }'
}
