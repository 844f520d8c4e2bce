#!/usr/bin/env bash
# A real Prometheus scrapes twinloop's --metrics (issue 12): start the
# server with --metrics, a Prometheus server (Debian's package, installed
# if missing) that scrapes it every second, send a few requests, then ask
# Prometheus's HTTP API for up and twinloop_requests_total. PASS when the
# target is up and Prometheus holds the server's request count.
#
#   scripts/prometheus.sh [BACKEND]        (default auto)
#
# Ports: PROM_PORT (default 20310) and the two after it, on 127.0.0.1 only.
# It stops only the processes it started. Output: stdout, and
# results/metrics/prometheus-<backend>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
backend=${1:-auto}
base=${PROM_PORT:-20310}
http_port=$base metrics_port=$((base + 1)) prom_port=$((base + 2))

if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
	log "installing prometheus (Debian package)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
fi
for p in "$http_port" "$metrics_port" "$prom_port"; do
	port_free "$p" || die "port $p is in use: set PROM_PORT to a free range"
done
mkdir -p bin results/metrics
go build -o bin/server ./cmd/server

bench_traps
work=$(mktemp -d)
trap 'bench_cleanup; rm -rf "$work"' EXIT
bin/server --backend="$backend" --listen "127.0.0.1:$http_port" --metrics "127.0.0.1:$metrics_port" \
	--dir www --loops 2 2> "$work/server.err" &
server=$!
BENCH_PIDS+=("$server")
wait_listening "$server" "$http_port" || { cat "$work/server.err"; die "the server did not start"; }

cat > "$work/prometheus.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: twinloop
    static_configs:
      - targets: ['127.0.0.1:$metrics_port']
YML
promtool check config "$work/prometheus.yml" >/dev/null
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
	--web.listen-address="127.0.0.1:$prom_port" 2> "$work/prometheus.err" &
prom=$!
BENCH_PIDS+=("$prom")
wait_listening "$prom" "$prom_port" || { tail "$work/prometheus.err"; die "prometheus did not start"; }

sent=25
for ((i = 0; i < sent; i++)); do curl -s -o /dev/null "http://127.0.0.1:$http_port/"; done
curl -s -o /dev/null "http://127.0.0.1:$http_port/missing"

query() { # query PROMQL: the first result's value, or empty
	curl -s --get "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
		python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
}
up= ok= notfound=
for ((i = 0; i < 40; i++)); do
	up=$(query 'up{job="twinloop"}')
	ok=$(query 'sum(twinloop_requests_total{code="2xx"})')
	notfound=$(query 'sum(twinloop_requests_total{code="4xx"})')
	[[ $up == 1 && $ok == "$sent" && $notfound == 1 ]] && break
	sleep 0.5
done
series=$(query 'count({__name__=~"twinloop_.+"})')
gos=$(query 'count({__name__=~"go_.+"})')
promtool_out=$(curl -s "http://127.0.0.1:$metrics_port/metrics" | promtool check metrics 2>&1) && lint=ok || lint="FAIL: $promtool_out"
verdict=PASS
[[ $up == 1 && $ok == "$sent" && $notfound == 1 && $lint == ok ]] || verdict=FAIL
be=$(sed -n 's/.*with backend \([a-z]*\),.*/\1/p' "$work/server.err")
out=results/metrics/prometheus-$be.txt
{
	echo "prometheus scrape $(date -u +%FT%RZ) commit $(git rev-parse --short HEAD) backend=$be: $verdict"
	echo "  $(prometheus --version 2>&1 | head -1)"
	echo "  up{job=\"twinloop\"} = $up; sum(twinloop_requests_total{code=\"2xx\"}) = ${ok:-none} (sent $sent); {code=\"4xx\"} = ${notfound:-none} (sent 1)"
	echo "  series: twinloop_* $series, go_* $gos; promtool check metrics: $lint"
	echo "  rerun: scripts/prometheus.sh $backend    (or make test-ops)"
} | tee "$out"
[[ $verdict == PASS ]]
