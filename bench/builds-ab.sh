#!/usr/bin/env bash
# builds-ab.sh: two (or more) builds measured in turn with lapse-bench,
# ROUNDS times, alternating, so that drift in the machine falls on all of
# them alike. Each run starts its own cluster from that build's bin
# directory. For each run it prints the round, the directory, and per
# workload its items/s, p50, p99 and CPU a call.
#
#   bench/builds-ab.sh ROUNDS WORKLOADS RF BINDIR [BINDIR...]
#
# e.g. bench/builds-ab.sh 3 put,batch-put,get 3 /tmp/before/bin build/bin
# (build the other revision with `git worktree add` and cmake into its own
# directory; never rebuild a directory a run is using). Environment:
# SECONDS_RUN (default 6), THREADS (default 16: lapse-bench's --threads).
set -euo pipefail
(($# >= 4)) || { echo "usage: bench/builds-ab.sh ROUNDS WORKLOADS RF BINDIR [BINDIR...]" >&2; exit 2; }
rounds=$1 workloads=$2 rf=$3
shift 3
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "builds-ab: bad ROUNDS $rounds" >&2; exit 2; }
[[ $rf =~ ^[1-9]$ ]] || { echo "builds-ab: bad RF $rf" >&2; exit 2; }
for d in "$@"; do
  [[ -x $d/lapse-bench ]] || { echo "builds-ab: no lapse-bench in $d" >&2; exit 2; }
done
seconds=${SECONDS_RUN:-6}
threads=${THREADS:-16}
[[ $threads =~ ^[1-9][0-9]*$ ]] || { echo "builds-ab: bad THREADS $threads" >&2; exit 2; }

for ((r = 1; r <= rounds; r++)); do
  for d in "$@"; do
    echo "builds-ab: round $r of $rounds, $d" >&2
    out=$(timeout 600 "$d/lapse-bench" --bin-dir "$d" --replication "$rf" --etcd 1 \
      --seconds "$seconds" --warmup 1 --threads "$threads" --workloads "$workloads" 2>&1) ||
      { echo "builds-ab: lapse-bench from $d failed:" >&2; echo "$out" | tail -5 >&2; exit 1; }
    echo "$out" | awk -v r="$r" -v d="$d" '
      $2 ~ /^rf=/ && $3 ~ /^threads=/ { for (i = 1; i <= NF; i++) if ($i ~ /^(items\/s|p50|p99)=/) f[$1] = f[$1] " " $i }
      $2 ~ /^rf=/ && $3 ~ /^cpu\/call=/ { c[$1] = " " $3 }
      END { for (w in f) print r, d, w f[w] c[w] }'
  done
done
