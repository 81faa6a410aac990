#!/usr/bin/env bash
# prometheus_scrape_test: deploy/prometheus.yml works with a real Prometheus
# against real nodes, and TTL deletions show up through it.
#
#   tests/prometheus_scrape_test.sh PROMETHEUS_YML BIN_DIR
#
# 1. a coordinator and three nodes start on free loopback ports, each node
#    with --metrics-listen on a free loopback port;
# 2. a config is generated from deploy/prometheus.yml: the same jobs and
#    labels, the three targets replaced by those ports, 1 s intervals
#    (promtool checks both files when it is installed);
# 3. Prometheus starts on a free loopback port, offline (no external URL
#    to work out, temporary storage) and scrapes the three nodes (up == 1,
#    with their node labels);
# 4. a table gets TTL, 30 items due within ~2 s and 10 due tomorrow are
#    written; /api/v1/query for sum(lapse_ttl_deleted_items_total) reaches
#    30 within a bounded wait, and stays exactly 30.
# Skips (exit 77) without /usr/bin/prometheus ($LAPSE_PROMETHEUS overrides
# the path) or curl. Every process it started is stopped on exit.
set -euo pipefail

config=$1 bin=$2
me=prometheus_scrape_test
prom=${LAPSE_PROMETHEUS:-/usr/bin/prometheus}
skip() {
  echo "$me: SKIP: $*"
  exit 77
}
[[ -x $prom ]] || skip "no $prom (deploy/install-deps.sh installs the prometheus package)"
command -v curl >/dev/null 2>&1 || skip "no curl"
[[ -f $config ]] || { echo "$me: FAIL: $config is missing" >&2; exit 1; }

tmp_root=${LAPSE_TEST_TMP:-/tmp}
mkdir -p "$tmp_root"
tmp=$(mktemp -d "$tmp_root/prometheus_scrape_test.XXXXXX")
pids=()

cleanup() {
  local rc=$? pid
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT

fail() {
  echo "$me: FAIL: $*" >&2
  local log
  for log in "$tmp"/*.log; do
    [[ -f $log ]] && { echo "--- $log" >&2; tail -n 15 "$log" >&2; }
  done
  exit 1
}

# ---------------------------------------------------------------- helpers
port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
random_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    port_free "$p" && { echo "$p"; return; }
  done
}
# Waits up to $2 s for "$1" (a shell command) to succeed.
wait_for() {
  local deadline=$((SECONDS + $2))
  until eval "$1" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}
# Starts "$@" in the background, logging to $1; its pid goes into pids.
spawn() {
  local log=$1
  shift
  "$@" >>"$log" 2>&1 </dev/null &
  pids+=($!)
}
cli() {
  "$bin/lapse" --coordinator "$coord_url" --timeout-ms 3000 "$@"
}
# The value of a one-sample instant query $1 ("" when there is no sample).
prom_query() {
  curl -sf -G --max-time 5 "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1" |
    sed -n 's/.*"value":\[[^,]*,"\([^"]*\)"\].*/\1/p'
}

# ---------------------------------------------------------------- the cluster
# A port picked here may be taken before the daemon binds it (other tests
# run concurrently): a daemon that exits at once is started again on others.
coord_url=
for _ in 1 2 3 4 5; do
  coord_url=tcp://127.0.0.1:$(random_port)
  spawn "$tmp/coordinator.log" "$bin/lapse-coordinator" --listen "$coord_url" --data "$tmp/coordinator"
  wait_for "cli list-tables || ! kill -0 ${pids[-1]}" 20 || fail "the coordinator does not answer"
  kill -0 "${pids[-1]}" 2>/dev/null && break
  coord_url=
done
[[ -n $coord_url ]] || fail "the coordinator did not start"

metrics=()
for i in 1 2 3; do
  for _ in 1 2 3 4 5; do
    m=$(random_port)
    spawn "$tmp/node$i.log" "$bin/lapse-node" --id "$i" --listen "tcp://127.0.0.1:$(random_port)" \
      --coordinator "$coord_url" --data "$tmp/node$i" --metrics-listen "127.0.0.1:$m"
    wait_for "curl -sf http://127.0.0.1:$m/metrics || ! kill -0 ${pids[-1]}" 20 ||
      fail "node $i serves no metrics on 127.0.0.1:$m"
    if kill -0 "${pids[-1]}" 2>/dev/null; then
      metrics+=("$m")
      break
    fi
  done
  ((${#metrics[@]} == i)) || fail "node $i did not start"
done
three_up() {
  [[ $(cli cluster-status | grep -o '"State": *"UP"' | wc -l) -eq 3 ]]
}
wait_for three_up 20 || fail "three nodes are not UP: $(cli cluster-status)"

# ---------------------------------------------------------------- the config
# Same jobs and labels; targets 127.0.0.1:9401..9403 -> the nodes' ports.
sed -e "s/'127.0.0.1:9401'/'127.0.0.1:${metrics[0]}'/" \
  -e "s/'127.0.0.1:9402'/'127.0.0.1:${metrics[1]}'/" \
  -e "s/'127.0.0.1:9403'/'127.0.0.1:${metrics[2]}'/" \
  -e 's/^\(  *scrape_interval:\).*/\1 1s/' \
  -e 's/^\(  *evaluation_interval:\).*/\1 1s/' \
  -e 's/^\(  *scrape_timeout:\).*/\1 1s/' "$config" >"$tmp/prometheus.yml"
for i in 0 1 2; do
  grep -q "'127.0.0.1:${metrics[i]}'" "$tmp/prometheus.yml" ||
    fail "$config has no target '127.0.0.1:940$((i + 1))' to replace"
done
[[ $(grep -c 'job_name:' "$tmp/prometheus.yml") -eq $(grep -c 'job_name:' "$config") ]] ||
  fail "the generated config lost a job"
grep -v '^ *#' "$tmp/prometheus.yml" | grep -q '127.0.0.1:940[123]' && fail "a target was not replaced"
job=$(sed -n 's/^ *- job_name: *//p' "$config" | head -n 1)
[[ -n $job ]] || fail "$config names no job"
if command -v promtool >/dev/null 2>&1; then
  promtool check config "$config" >"$tmp/promtool.out" 2>&1 ||
    fail "promtool rejects $config: $(cat "$tmp/promtool.out")"
  promtool check config "$tmp/prometheus.yml" >"$tmp/promtool.out" 2>&1 ||
    fail "promtool rejects the generated config: $(cat "$tmp/promtool.out")"
fi

# ---------------------------------------------------------------- Prometheus
# Offline: listen on loopback only, an external URL given (else it is made
# from the host name), storage and logs in the temporary directory.
prom_port=
for _ in 1 2 3 4 5; do
  prom_port=$(random_port)
  spawn "$tmp/prometheus.log" "$prom" --config.file="$tmp/prometheus.yml" \
    --storage.tsdb.path="$tmp/prom-data" --storage.tsdb.retention.time=1h \
    --web.listen-address="127.0.0.1:$prom_port" --web.external-url="http://127.0.0.1:$prom_port/" \
    --log.level=warn
  wait_for "curl -sf http://127.0.0.1:$prom_port/-/ready || ! kill -0 ${pids[-1]}" 30 ||
    fail "prometheus is not ready within 30 s"
  kill -0 "${pids[-1]}" 2>/dev/null && break
  prom_port=
done
[[ -n $prom_port ]] || fail "prometheus did not start"
echo "$me: prometheus on 127.0.0.1:$prom_port scraping ${metrics[*]} (job $job)"
wait_for "[[ \$(prom_query 'count(up{job=\"$job\",node=~\"1|2|3\"} == 1)') == 3 ]]" 30 ||
  fail "prometheus does not scrape the three nodes: $(curl -s "http://127.0.0.1:$prom_port/api/v1/targets")"

# ---------------------------------------------------------------- TTL
cli create-table PromTtl --partition-key Id:S --partitions 16 >/dev/null || fail "create-table"
cli update-ttl PromTtl --enable --attribute ExpirationTime >/dev/null || fail "update-ttl"
wait_for "cli describe-ttl PromTtl | grep -q '\"TimeToLiveStatus\": *\"ENABLED\"'" 20 ||
  fail "TTL is not ENABLED: $(cli describe-ttl PromTtl)"
expiring=30
now=$(date +%s)
{
  for i in $(seq 1 "$expiring"); do
    echo "{\"Id\":{\"S\":\"e$i\"},\"ExpirationTime\":{\"N\":\"$((now + 1 + i % 2))\"}}"
  done
  for i in $(seq 1 10); do
    echo "{\"Id\":{\"S\":\"l$i\"},\"ExpirationTime\":{\"N\":\"$((now + 86400))\"}}"
  done
} | cli batch-put PromTtl >/dev/null || fail "batch-put"
query="sum(lapse_ttl_deleted_items_total{table=\"PromTtl\"})"
deadline=$((SECONDS + 60))
got=
while :; do
  got=$(prom_query "$query" || true)
  [[ -n $got ]] && ((${got%.*} >= expiring)) && break
  ((SECONDS < deadline)) || fail "$query is '$got' after 60 s, want $expiring"
  sleep 0.5
done
echo "$me: prometheus reports $got TTL deletions at +$(($(date +%s) - now)) s"
((${got%.*} == expiring)) || fail "$query is $got, want exactly $expiring"
[[ $(cli scan PromTtl | grep -c '"Id"') -eq 10 ]] || fail "the 10 items due tomorrow are not all there"

echo "$me: ok (${SECONDS}s)"
