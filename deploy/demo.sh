#!/usr/bin/env bash
# make demo: the SessionData example of DynamoDB's TTL documentation, live on
# the local cluster (make cluster). Creates SessionData (UserName, SessionId,
# CreationTime, ExpirationTime as the TTL attribute) with its change stream
# on, enables TTL, loads sessions due a few seconds ahead, then shows them
# disappear while the TTL deletes arrive on the stream, one DynamoDB Streams
# record per line.
#
#   deploy/demo.sh [BIN_DIR]
#
# The cluster is make cluster's: tcp://127.0.0.1:7400 and :7410, or the one that
# LAPSE_PORT=N (as for make cluster) or LAPSE_COORDINATOR=URL names.
#
# Running it again drops the previous demo's SessionData first.
set -euo pipefail

bin=${1:-$PWD/build/bin}
lapse="$bin/lapse"
table=SessionData
sessions=${DEMO_SESSIONS:-12}
work=$(mktemp -d "${TMPDIR:-/tmp}/lapse-demo.XXXXXX")
follower=

cleanup() {
  if [[ -n $follower ]]; then
    kill "$follower" 2>/dev/null || true
    wait "$follower" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

say() { printf '\033[1m%s\033[0m\n' "$*"; }

[[ -x $lapse ]] || { echo "demo: $lapse not built (run make build)" >&2; exit 1; }
if [[ -z ${LAPSE_COORDINATOR:-} && -n ${LAPSE_PORT:-} ]]; then
  [[ $LAPSE_PORT =~ ^[0-9]+$ ]] || { echo "demo: bad port $LAPSE_PORT (LAPSE_PORT)" >&2; exit 2; }
  # make cluster's two coordinators (deploy/local-cluster.sh)
  export LAPSE_COORDINATOR=tcp://127.0.0.1:$LAPSE_PORT,tcp://127.0.0.1:$((LAPSE_PORT + 10))
fi
if ! "$lapse" cluster-status >/dev/null 2>&1; then
  echo "demo: no cluster answers at ${LAPSE_COORDINATOR:-tcp://127.0.0.1:7400,tcp://127.0.0.1:7410} (run make cluster first)" >&2
  exit 1
fi

if "$lapse" describe-table "$table" >/dev/null 2>&1; then
  say "Dropping the previous demo's $table"
  "$lapse" delete-table "$table" >/dev/null
fi

say "1. create-table $table, with its change stream on"
"$lapse" create-table "$table" --partition-key UserName:S --sort-key SessionId:S \
  --partitions 16 --stream on >/dev/null
echo "   lapse create-table $table --partition-key UserName:S --sort-key SessionId:S --stream on"

say "2. update-ttl $table --enable --attribute ExpirationTime"
"$lapse" update-ttl "$table" --enable --attribute ExpirationTime >/dev/null
status=
for _ in $(seq 1 100); do
  status=$("$lapse" describe-ttl "$table" | grep -o '"TimeToLiveStatus":"[A-Z]*"' || true)
  [[ $status == *ENABLED* ]] && break
  sleep 0.1
done
echo "   $status"
[[ $status == *ENABLED* ]] || { echo "demo: TTL did not turn ENABLED" >&2; exit 1; }

say "3. following the stream's TTL deletes (lapse stream $table --from latest --follow --only ttl)"
"$lapse" stream "$table" --from latest --follow --only ttl >"$work/stream" 2>"$work/stream.err" &
follower=$!
sleep 0.5

now=$(date +%s)
say "4. loading $sessions sessions, due $((now + 4)) to $((now + 4 + (sessions - 1) / 2)) (now is $now)"
for ((i = 0; i < sessions; i++)); do
  due=$((now + 4 + i / 2))
  "$lapse" put "$table" "$(printf '{"UserName":{"S":"user%d"},"SessionId":{"S":"s-%04d"},"CreationTime":{"N":"%d"},"ExpirationTime":{"N":"%d"}}' \
    $((i % 4)) "$i" "$now" "$due")" >/dev/null
done

say "5. watching: sessions left in $table, and TTL records as they arrive on the stream"
shown=0
left=$sessions
deadline=$((SECONDS + 60))
while ((SECONDS < deadline)); do
  left=$("$lapse" scan "$table" | grep -c UserName || true)
  records=$(wc -l <"$work/stream")
  if ((records > shown)); then
    tail -n +"$((shown + 1))" "$work/stream" | head -n "$((records - shown))" | sed 's/^/   stream: /'
    shown=$records
  fi
  printf '   %s  %2d sessions left, %2d TTL records on the stream\n' "$(date +%T)" "$left" "$shown"
  if ((left == 0 && shown >= sessions)); then
    break
  fi
  sleep 1
done
if ((left != 0 || shown < sessions)); then
  echo "demo: after 60 s, $left sessions left and $shown of $sessions TTL records seen" >&2
  sed 's/^/   stream stderr: /' "$work/stream.err" >&2
  exit 1
fi
say "Every session was deleted when due, and each delete arrived once on the stream,"
say "tagged \"userIdentity\":{\"type\":\"Service\",\"principalId\":\"lapse.ttl\"}."
