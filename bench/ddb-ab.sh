#!/usr/bin/env bash
# ddb-ab.sh: two (or more) DynamoDB gateways on one cluster, measured in
# turn: lapse-ddb-bench against each port, ROUNDS times, alternating, so
# that drift in the machine or the cluster falls on both. For each run it
# prints the native and HTTP calls/s and p99, the HTTP/native ratio, and the
# gateway's own CPU a call: its process's CPU over the run (loading and
# warm-up included) over HTTP calls/s x (seconds + 1 s of warm-up).
#
#   bench/ddb-ab.sh ROUNDS WORKLOAD PORT [PORT...]
#
# WORKLOAD is put or get (one at a time: the CPU figure is per workload).
# Environment: LAPSE_BIN (default build/bin), COORDINATOR (default the
# local cluster's tcp://127.0.0.1:17400,tcp://127.0.0.1:17410), SECONDS_RUN
# (default 8). Each gateway is found by its --listen 127.0.0.1:PORT.
set -euo pipefail
(($# >= 3)) || { echo "usage: bench/ddb-ab.sh ROUNDS put|get PORT [PORT...]" >&2; exit 2; }
rounds=$1 workload=$2
shift 2
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ddb-ab: bad ROUNDS $rounds" >&2; exit 2; }
[[ $workload == put || $workload == get ]] || { echo "ddb-ab: WORKLOAD is put or get" >&2; exit 2; }
bin=${LAPSE_BIN:-build/bin}
coordinator=${COORDINATOR:-tcp://127.0.0.1:17400,tcp://127.0.0.1:17410}
seconds=${SECONDS_RUN:-8}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

for ((r = 1; r <= rounds; r++)); do
  for port in "$@"; do
    pid=$(pgrep -f "lapse-dynamodb.*--listen 127.0.0.1:$port( |$)" | head -1) ||
      { echo "ddb-ab: no gateway listening on 127.0.0.1:$port" >&2; exit 1; }
    echo "ddb-ab: round $r/$rounds, port $port" >&2
    c0=$(cpu_ticks "$pid")
    out=$("$bin/lapse-ddb-bench" --endpoint "http://127.0.0.1:$port/" --coordinator "$coordinator" \
      --threads 16 --seconds "$seconds" --workloads "$workload" 2>/dev/null)
    c1=$(cpu_ticks "$pid")
    rate=$(grep 'http ' <<<"$out" | grep -o 'calls/s=[0-9]*' | cut -d= -f2)
    [[ -n $rate && $rate -gt 0 ]] || { echo "ddb-ab: no HTTP figure from port $port" >&2; exit 1; }
    figures=$(grep -E 'native|http' <<<"$out" | grep -o 'calls/s=[0-9]*\|p99=[0-9.]*ms\|http/native=[0-9.]*' |
      paste -sd' ')
    awk -v p="$port" -v f="$figures" -v c=$((c1 - c0)) -v r="$rate" -v s="$seconds" \
      -v hz="$(getconf CLK_TCK)" \
      'BEGIN { printf "%s: native %s gateway %.1f us/call\n", p, f, c * 1e6 / hz / (r * (s + 1)) }'
  done
done
