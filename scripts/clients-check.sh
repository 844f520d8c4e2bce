#!/usr/bin/env bash
# clients-check.sh checks twinloop's static-file semantics with real
# clients, on each backend (epoll, poll, blocking, and io_uring where it runs here):
#
#   1. headless Chromium loads a page whose CSS and JS are served from
#      precompressed sidecars (app.css.br/.zst/.gz, app.js.br/.zst/.gz,
#      beside the identity files): the script runs only if the stylesheet
#      applied, and then changes the title; the access log shows that the
#      bytes sent were a sidecar's, not the identity file's;
#   2. curl --compressed gets each file byte for byte, with
#      Content-Encoding and Vary: Accept-Encoding, whichever of gzip, zstd
#      and br it asks for;
#   3. a multipart/byteranges answer (three ranges of a file sent from
#      disk, two of which touch and are coalesced) is parsed by Python's
#      email parser into the right parts.
#
#   scripts/clients-check.sh            PORT (default 21480) to move it
#
# It installs what it needs with apt-get (chromium, brotli, zstd, curl),
# builds ./cmd/server, serves a temp docroot on 127.0.0.1 only, and writes
# results/clients/summary.md. Exit status 0 when every check passed. Only
# the servers it started are ever signalled.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib.sh
source "$ROOT/scripts/lib.sh"
BENCH_PORT=${PORT:-21480}
PORT_NEXT=$BENCH_PORT
OUT=${RESULTS:-$ROOT/results/clients}

need=()
command -v chromium >/dev/null || need+=(chromium)
command -v brotli >/dev/null || need+=(brotli)
command -v zstd >/dev/null || need+=(zstd)
command -v curl >/dev/null || need+=(curl)
if ((${#need[@]})); then
	log "installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null || die "apt-get install ${need[*]} failed (run apt-get update first?)"
fi
command -v python3 >/dev/null || die "python3 is needed for the multipart check"

WORK=$(mktemp -d /tmp/twinloop-clients.XXXXXX)
bench_traps
trap 'bench_cleanup; rm -rf "$WORK"' EXIT
BIN=$WORK/server
(cd "$ROOT" && go build -o "$BIN" ./cmd/server) || die "build failed"

# The site. The title says "waiting" until app.js runs, and app.js only
# renames it when app.css has given #probe its width.
DOC=$WORK/www
mkdir -p "$DOC"
cat >"$DOC/index.html" <<'EOF'
<!doctype html>
<html><head><title>waiting</title>
<link rel="stylesheet" href="/app.css">
</head><body><div id="probe">probe</div>
<script src="/app.js"></script>
</body></html>
EOF
{
	echo '#probe { width: 123px; }'
	for i in $(seq 1 400); do echo ".rule$i { margin: ${i}px; padding: 1px 2px 3px 4px; }"; done
} >"$DOC/app.css"
{
	echo 'var filler = ['
	for i in $(seq 1 400); do echo "  'line $i of filler that compresses well',"; done
	echo '];'
	echo 'if (getComputedStyle(document.getElementById("probe")).width === "123px") {'
	echo '  document.title = "precompressed ok " + filler.length;'
	echo '}'
} >"$DOC/app.js"
for f in app.css app.js; do
	gzip -9 -k -n "$DOC/$f"
	brotli -q 11 -k "$DOC/$f"
	zstd -q -19 -k "$DOC/$f"
done
head -c 300000 /dev/urandom >"$DOC/big.bin"
touch "$DOC"/*.gz "$DOC"/*.br "$DOC"/*.zst # not older than their sources

fails=0
report=()
check() { # check NAME CONDITION-STATUS DETAIL
	if [[ $2 == 0 ]]; then
		log "ok   $1"
		report+=("| $BACKEND | $1 | pass | $3 |")
	else
		log "FAIL $1: $3"
		report+=("| $BACKEND | $1 | **FAIL** | $3 |")
		fails=$((fails + 1))
	fi
}

size() { stat -c %s "$1"; }

for BACKEND in epoll uring poll blocking; do
	port=$(next_port)
	alog=$WORK/access-$BACKEND.log
	extra=()
	# One connection at a time: Chromium's parallel keep-alive connections
	# would wait behind each other for the 75 s keep-alive timeout.
	[[ $BACKEND == blocking ]] && extra=(--keepalive-timeout 1s)
	"$BIN" --backend="$BACKEND" --listen "127.0.0.1:$port" --dir "$DOC" --loops 1 --precompressed \
		--cache-control "public, max-age=60" -v "${extra[@]}" >"$alog" 2>"$WORK/server-$BACKEND.err" &
	pid=$!
	BENCH_PIDS+=("$pid")
	if ! wait_listening "$pid" "$port"; then
		reap "$pid" 5
		log "skip $BACKEND: $(tail -1 "$WORK/server-$BACKEND.err")"
		report+=("| $BACKEND | all | skipped | $(tail -1 "$WORK/server-$BACKEND.err") |")
		continue
	fi
	url=http://127.0.0.1:$port

	# 1. Chromium.
	dom=$(timeout 60 chromium --headless --no-sandbox --disable-gpu --no-first-run \
		--user-data-dir="$WORK/chrome-$BACKEND" --virtual-time-budget=5000 --dump-dom "$url/" 2>"$WORK/chrome-$BACKEND.err")
	title=$(grep -o '<title>[^<]*</title>' <<<"$dom")
	[[ $title == "<title>precompressed ok 400</title>" ]]
	check "chromium runs the precompressed script" $? "title: ${title:-none}"
	sleep 1.2 # the access log is written once a second
	for f in app.css app.js; do
		sent=$(awk -v p="/$f" '$7 == p && $9 == 200 { n = $10 } END { print n }' "$alog")
		coded=1
		for s in "$DOC/$f".br "$DOC/$f".zst "$DOC/$f".gz; do
			[[ $sent == "$(size "$s")" ]] && coded=0
		done
		check "chromium got /$f as a sidecar" $coded "$sent bytes sent; identity $(size "$DOC/$f"), br $(size "$DOC/$f.br"), zst $(size "$DOC/$f.zst"), gz $(size "$DOC/$f.gz")"
	done

	# 2. curl --compressed, byte for byte.
	for f in app.css app.js; do
		curl -s --compressed -D "$WORK/h" -o "$WORK/body" "$url/$f"
		cmp -s "$WORK/body" "$DOC/$f"
		check "curl --compressed /$f byte-exact" $? "$(tr -d '\r' <"$WORK/h" | grep -iE '^(content-encoding|vary|cache-control):' | tr '\n' ' ')"
		enc=$(tr -d '\r' <"$WORK/h" | grep -ci '^content-encoding: \(br\|zstd\|gzip\)$')
		vary=$(tr -d '\r' <"$WORK/h" | grep -ci '^vary: accept-encoding$')
		[[ $enc == 1 && $vary == 1 ]]
		check "curl --compressed /$f coded, with Vary" $? "Content-Encoding lines $enc, Vary lines $vary"
	done
	for enc in gzip zstd br; do
		curl -s --compressed -H "Accept-Encoding: $enc" -D "$WORK/h" -o "$WORK/body" "$url/app.js"
		cmp -s "$WORK/body" "$DOC/app.js" && tr -d '\r' <"$WORK/h" | grep -qx "content-encoding: $enc" -i
		check "curl --compressed, Accept-Encoding: $enc, byte-exact" $? "$(tr -d '\r' <"$WORK/h" | grep -i '^content-encoding:')"
	done
	curl -s -D "$WORK/h" -o "$WORK/body" "$url/app.js"
	cmp -s "$WORK/body" "$DOC/app.js" && ! grep -qi '^content-encoding' "$WORK/h" && grep -qi '^vary: accept-encoding' "$WORK/h"
	check "curl without --compressed gets identity, with Vary" $? "$(size "$WORK/body") bytes"

	# 3. multipart/byteranges, parsed by Python's email package.
	curl -s -D "$WORK/h" -o "$WORK/body" -H 'Range: bytes=100-199,200-299,250000-250009,-5' "$url/big.bin"
	out=$(python3 - "$WORK/h" "$WORK/body" "$DOC/big.bin" <<'EOF'
import email, email.policy, sys
head = open(sys.argv[1], 'rb').read().decode('latin-1').split('\r\n')
body = open(sys.argv[2], 'rb').read()
data = open(sys.argv[3], 'rb').read()
assert head[0].startswith('HTTP/1.1 206'), head[0]
fields = {k.lower(): v.strip() for k, _, v in (l.partition(':') for l in head[1:] if l)}
assert int(fields['content-length']) == len(body), (fields['content-length'], len(body))
msg = email.message_from_bytes(b'Content-Type: ' + fields['content-type'].encode() + b'\r\n\r\n' + body, policy=email.policy.HTTP)
assert msg.get_content_type() == 'multipart/byteranges', msg.get_content_type()
want = [(100, 299), (250000, 250009), (len(data) - 5, len(data) - 1)]
parts = list(msg.iter_parts())
assert len(parts) == len(want), len(parts)
for p, (a, b) in zip(parts, want):
    assert p['Content-Range'] == 'bytes %d-%d/%d' % (a, b, len(data)), p['Content-Range']
    assert p.get_payload(decode=True) == data[a:b + 1], (a, b)
print('%d parts, %s' % (len(parts), ', '.join(p['Content-Range'] for p in parts)))
EOF
	)
	check "multipart/byteranges parsed by python email" $? "$out"

	kill -TERM "$pid"
	reap "$pid" 10
done

mkdir -p "$OUT"
{
	echo "# Real clients against twinloop: Chromium, curl, Python's email parser"
	echo
	echo "From \`scripts/clients-check.sh\` at $(cd "$ROOT" && git rev-parse --short HEAD) on $(date -u +%Y-%m-%d),"
	echo "$(uname -sr), $(chromium --version 2>/dev/null | head -1), $(curl --version | head -1 | cut -d' ' -f1-2), Python $(python3 -c 'import platform; print(platform.python_version())')."
	echo "Rerun: \`scripts/clients-check.sh\` (seconds, once chromium is installed)."
	echo
	echo "| backend | check | result | detail |"
	echo "|---|---|---|---|"
	printf '%s\n' "${report[@]}"
} >"$OUT/summary.md"
log "wrote $OUT/summary.md; $fails failed"
((fails == 0))
