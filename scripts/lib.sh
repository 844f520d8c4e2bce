# shellcheck shell=bash
# lib.sh holds what the bash scripts left (machine setup and the
# operations checks; every benchmark loop is scripts/labrun's) share:
# logging, installing packages, the processes they started, ports, the
# fixture docroot and wrk's report. Source it; it runs nothing by itself.
#
# Every process started here is recorded in BENCH_PIDS and only those are
# ever signalled: bench_cleanup (installed by bench_traps) kills what is
# still alive on EXIT, INT and TERM, so a failed or interrupted run leaves
# no server behind. Everything listens on and connects to 127.0.0.1 only.

BENCH_HOST=127.0.0.1
BENCH_PIDS=()          # processes we started and have not reaped yet
PORT_NEXT=${BENCH_PORT:-18080}
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

# vulnerabilities prints one line per file of
# /sys/devices/system/cpu/vulnerabilities, "Not affected" included, so that
# env.txt says in full what this CPU and kernel pay on each kernel entry.
vulnerabilities() {
	local f
	for f in /sys/devices/system/cpu/vulnerabilities/*; do
		[ -r "$f" ] && echo "vulnerability $(basename "$f"): $(<"$f")"
	done
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

# --- wrk's report -------------------------------------------------------------
# The measure of a run (CPU per request, the quiet gate, rounds) is
# scripts/labrun's.

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

# div A B [FORMAT]: A/B with awk, empty when B is 0.
div() {
	awk -v a="$1" -v b="$2" -v f="${3:-%.2f}" 'BEGIN { if (b + 0 != 0) printf f "\n", a / b }'
}
