#!/usr/bin/env bash
# make test: every package's tests under the race detector, with the fuzz
# seed corpora as tests.
#
# The backend package's tests are most of the time (about 350 s of a
# 6-minute run on two CPUs), and most of theirs is spent waiting: for a
# timeout to fire, a slow client, a held file system. So its test binary is
# built once and run as two processes at once, beside the other packages:
#   - one runs the tests of the files named in FIRST (file systems, slow
#     and stalled clients, CGI);
#   - the other runs every other test (-test.skip with the same pattern),
#     so a new test runs in one of the two whatever file it is in.
# In each, the subtests of the tests that wait for timers run in parallel
# (backend/suite_test.go, waits), more at once than there are CPUs.
# Each process has its own servers, FUSE mounts and fd table. Their output
# is printed whole, one after the other, once both are done.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export GOFLAGS=${GOFLAGS:--ldflags=-checklinkname=0}

FIRST="stall cgi linger fs hungfs fserr"
names=$(for f in $FIRST; do grep -ho '^func Test[A-Za-z0-9_]*' "backend/${f}_test.go"; done | sed 's/^func //' | paste -sd'|')
half="^(${names})\$"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go test -race -c -o "$tmp/backend.test" ./backend/ || exit 1
run_half() { # flag name: one half of the backend tests, into $tmp/name
	(cd backend && "$tmp/backend.test" -test.count=1 -test.timeout=8m -test.parallel=8 "$1" "$half" >"$tmp/$2" 2>&1)
}
start=$(date +%s)
run_half -test.run first & a=$!
run_half -test.skip rest & b=$!

rc=0
mapfile -t others < <(go list ./... | grep -v '/twinloop/backend$')
go test -race -count=1 -timeout 8m "${others[@]}" || rc=1
wait "$a" || rc=1
wait "$b" || rc=1
echo "== ./backend/, the tests of the files: $FIRST"
cat "$tmp/first"
echo "== ./backend/, every other test"
cat "$tmp/rest"
echo "== ./backend/: both halves done $(( $(date +%s) - start )) s after they started"
exit $rc
