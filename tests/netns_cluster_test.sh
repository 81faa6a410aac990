#!/usr/bin/env bash
# netns_cluster_test: deploy/netns-cluster.sh runs a working cluster in
# network namespaces and `down` leaves nothing behind.
#
#   tests/netns_cluster_test.sh NETNS_SCRIPT BIN_DIR
#
# 1. refusals create nothing: not root (when runuser and user nobody exist),
#    a subnet that overlaps the root namespace's loopback;
# 2. `up` starts the coordinator and three nodes, each in its namespace and
#    listening on its namespace address only; the root namespace gains no
#    link and no address; a second `up` is harmless;
# 3. from the coordinator's namespace: a table, 40 puts and gets, and every
#    node's /metrics (on its namespace address) counts some of the puts;
# 4. TTL: enabled, an item due in ~2 s disappears (bounded poll), an item
#    due tomorrow stays, lapse_ttl_deleted_items_total counts the deletion,
#    and the stream (hosted across namespaces, nodes sharing a cluster
#    token) holds its one lapse.ttl REMOVE and the 42 INSERTs;
# 5. `partition 2` makes a scan fail (node 2 unreachable), `heal 2` makes
#    it work again;
# 6. `down` stops every daemon and deletes every namespace; the root
#    namespace's links are as before; a second `down` is a no-op.
# Skips (exit 77) when not root or network namespaces are unavailable.
# Names are unique per run (lapse-t<pid>-*), so concurrent runs do not
# collide; the subnet may repeat since nothing of it reaches the root
# namespace. A trap tears everything down on failure.
set -euo pipefail

script=$1 bin=$2
me=netns_cluster_test
skip() {
  echo "$me: SKIP: $*"
  exit 77
}
[[ $(id -u) -eq 0 ]] || skip "needs root"
command -v ip >/dev/null 2>&1 || skip "no ip (iproute2)"
ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here"

prefix=lapse-t$$
tmp_root=${LAPSE_TEST_TMP:-/tmp}
mkdir -p "$tmp_root"
tmp=$(mktemp -d "$tmp_root/netns_cluster_test.XXXXXX")
export LAPSE_HOME=$tmp/home

cleanup() {
  local rc=$? ns pidf pid
  if [[ -f $LAPSE_HOME/netns.state ]]; then
    "$script" down >"$tmp/cleanup.out" 2>&1 || cat "$tmp/cleanup.out" >&2
  fi
  # Belt and braces: anything left with our names or our data dir.
  for pidf in "$LAPSE_HOME"/*.pid; do
    [[ -f $pidf ]] || continue
    pid=$(<"$pidf")
    if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "--data $LAPSE_HOME/"; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix-" || true); do
    echo "$me: cleanup: deleting leftover namespace $ns" >&2
    ip netns del "$ns" || true
  done
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT

fail() {
  echo "$me: FAIL: $*" >&2
  local log
  for log in "$LAPSE_HOME"/*.log; do
    [[ -f $log ]] && { echo "--- $log" >&2; tail -n 15 "$log" >&2; }
  done
  exit 1
}

# A namespace we may create at all (some containers forbid it).
if ! ip netns add "$prefix-probe" 2>/dev/null; then
  skip "cannot create a network namespace here"
fi
ip netns del "$prefix-probe"

ours() {
  ip netns list | awk '{print $1}' | grep "^$prefix-" || true
}
links_before=$(ip -o link show | awk -F': ' '{print $2}' | sort)
addrs_before=$(ip -4 -o addr show | awk '{print $2, $4}' | sort)

# ---------------------------------------------------------------- refusals
# (Only where nobody can run the script at all: not from a checkout under /root.)
if command -v runuser >/dev/null 2>&1 && id nobody >/dev/null 2>&1 &&
  runuser -u nobody -- test -x "$script" 2>/dev/null; then
  rc=0
  runuser -u nobody -- "$script" up --prefix "$prefix" --bin-dir "$bin" >"$tmp/out" 2>&1 || rc=$?
  [[ $rc -ne 0 ]] || fail "up as nobody succeeded"
  grep -q 'needs root' "$tmp/out" || fail "up as nobody said: $(cat "$tmp/out")"
fi
rc=0
"$script" up --prefix "$prefix" --subnet 127.0.0.0/24 --bin-dir "$bin" >"$tmp/out" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || fail "up on 127.0.0.0/24 exited $rc, want 1"
grep -q 'overlaps address 127.0.0.1/8' "$tmp/out" || fail "up on 127.0.0.0/24 said: $(cat "$tmp/out")"
[[ -z $(ours) ]] || fail "a refused up created namespaces: $(ours)"
[[ ! -e $LAPSE_HOME/netns.state ]] || fail "a refused up wrote a state file"

# ---------------------------------------------------------------- up
# 10.77.0.0/24 unless the root namespace uses it: then a few others.
subnet=
for cand in 10.77.0.0/24 10.77.$(($$ % 200 + 20)).0/24 172.31.$(($$ % 200 + 20)).0/24; do
  rc=0
  "$script" up --prefix "$prefix" --subnet "$cand" --bin-dir "$bin" >"$tmp/up.out" 2>&1 || rc=$?
  if [[ $rc -eq 0 ]]; then
    subnet=$cand
    break
  fi
  grep -q 'overlaps' "$tmp/up.out" || fail "up exited $rc: $(cat "$tmp/up.out")"
done
[[ -n $subnet ]] || fail "no free subnet among the candidates: $(cat "$tmp/up.out")"
base=${subnet%.0/24}
echo "$me: cluster $prefix up on $subnet in ${SECONDS}s"

cli() {
  "$script" lapse --timeout-ms 3000 "$@"
}

declare -A want_ns=([coordinator]=$prefix-c [node1]=$prefix-n1 [node2]=$prefix-n2 [node3]=$prefix-n3)
declare -A pids=()
for name in coordinator node1 node2 node3; do
  pid=$(<"$LAPSE_HOME/$name.pid")
  pids[$name]=$pid
  kill -0 "$pid" 2>/dev/null || fail "$name (pid $pid) is not running"
  [[ $(ip netns identify "$pid") == "${want_ns[$name]}" ]] ||
    fail "$name (pid $pid) runs in '$(ip netns identify "$pid")', want ${want_ns[$name]}"
done
for i in 1 2 3; do
  listen=$(ip netns exec "$prefix-n$i" ss -ltnH | awk '{print $4}' | sort | tr '\n' ' ')
  [[ $listen == "$base.1$i:7401 $base.1$i:9401 " ]] || fail "node $i listens on '$listen'"
done
listen=$(ip netns exec "$prefix-c" ss -ltnH | awk '{print $4}' | tr '\n' ' ')
[[ $listen == "$base.10:7400 " ]] || fail "the coordinator listens on '$listen'"
[[ $(ip -o link show | awk -F': ' '{print $2}' | sort) == "$links_before" ]] ||
  fail "the root namespace's links changed"
[[ $(ip -4 -o addr show | awk '{print $2, $4}' | sort) == "$addrs_before" ]] ||
  fail "the root namespace's addresses changed"
"$script" up --bin-dir "$bin" >"$tmp/up2.out" 2>&1 || fail "a second up failed: $(cat "$tmp/up2.out")"
grep -q 'coordinator already running' "$tmp/up2.out" || fail "a second up said: $(cat "$tmp/up2.out")"
"$script" status >"$tmp/status.out" 2>&1 || fail "status failed"
for ns in "$prefix-br" "$prefix-c" "$prefix-n1" "$prefix-n2" "$prefix-n3"; do
  grep -q "^namespace $ns:" "$tmp/status.out" || fail "status does not show $ns"
done
grep -q "$base.13/24" "$tmp/status.out" || fail "status does not show node 3's address"
[[ $(grep -o '"State": *"UP"' "$tmp/status.out" | wc -l) -eq 3 ]] ||
  fail "status does not show three nodes UP: $(cat "$tmp/status.out")"

# ---------------------------------------------------------------- items across namespaces
# GET /metrics of node $1, fetched from the coordinator's namespace.
scrape() {
  ip netns exec "$prefix-c" bash -c \
    "exec 3<>/dev/tcp/$base.1$1/9401 && printf 'GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n' >&3 && cat <&3"
}
# Sum of series $2 (a prefix of the line, labels included) on node $1.
metric_sum() {
  scrape "$1" | awk -v p="$2" 'index($0, p) == 1 { s += $NF } END { print s + 0 }'
}

cli create-table NetnsItems --partition-key Id:S --partitions 16 --stream on >/dev/null ||
  fail "create-table"
for i in $(seq 1 40); do
  cli put NetnsItems "{\"Id\":{\"S\":\"k$i\"},\"v\":{\"N\":\"$i\"}}" >/dev/null || fail "put k$i"
done
for i in $(seq 1 40); do
  out=$(cli get NetnsItems "{\"Id\":{\"S\":\"k$i\"}}") || fail "get k$i"
  [[ $out == *"\"v\":{\"N\":\"$i\"}"* ]] || fail "get k$i returned $out"
done
for i in 1 2 3; do
  n=$(metric_sum "$i" 'lapse_rpc_requests_total{call="PutItem",status="OK"}')
  ((n > 0)) || fail "node $i served no PutItem (its /metrics at $base.1$i:9401: $n)"
done

# ---------------------------------------------------------------- TTL
cli update-ttl NetnsItems --enable --attribute ExpirationTime >/dev/null || fail "update-ttl"
deadline=$((SECONDS + 20))
until cli describe-ttl NetnsItems | grep -q '"TimeToLiveStatus": *"ENABLED"'; do
  ((SECONDS < deadline)) || fail "TTL not ENABLED within 20 s: $(cli describe-ttl NetnsItems)"
  sleep 0.2
done
now=$(date +%s)
cli put NetnsItems "{\"Id\":{\"S\":\"soon\"},\"ExpirationTime\":{\"N\":\"$((now + 2))\"}}" >/dev/null ||
  fail "put soon"
cli put NetnsItems "{\"Id\":{\"S\":\"later\"},\"ExpirationTime\":{\"N\":\"$((now + 86400))\"}}" >/dev/null ||
  fail "put later"
[[ $(cli get NetnsItems '{"Id":{"S":"soon"}}') == *'"soon"'* ]] || fail "the item due in 2 s is not there at first"
deadline=$((SECONDS + 30))
while [[ $(cli get NetnsItems '{"Id":{"S":"soon"}}') != "{}" ]]; do
  ((SECONDS < deadline)) || fail "the item due at $((now + 2)) is still there at $(date +%s)"
  sleep 0.2
done
echo "$me: the item due at $((now + 2)) was gone at $(date +%s)"
[[ $(cli get NetnsItems '{"Id":{"S":"later"}}') == *'"later"'* ]] || fail "the item due tomorrow is gone"
# The counter may move just after the delete commits: poll it, bounded.
deadline=$((SECONDS + 10))
while :; do
  deleted=0
  for i in 1 2 3; do
    deleted=$((deleted + $(metric_sum "$i" 'lapse_ttl_deleted_items_total{table="NetnsItems"}')))
  done
  ((deleted >= 1 || SECONDS >= deadline)) && break
  sleep 0.2
done
((deleted == 1)) || fail "lapse_ttl_deleted_items_total sums to $deleted, want 1"

# The stream shards live on other nodes than their partitions: the TTL delete
# reached one across the namespaces, through Replicate calls carrying the
# cluster token netns-cluster.sh gives every node, and none was refused.
deadline=$((SECONDS + 15))
until cli stream NetnsItems --only ttl 2>/dev/null | grep -q '"Id":{"S":"soon"}'; do
  ((SECONDS < deadline)) || fail "no lapse.ttl record of \"soon\" on the stream: $(cli stream NetnsItems --only ttl 2>&1)"
  sleep 0.2
done
n=$(cli stream NetnsItems --only ttl 2>/dev/null | grep -c '"principalId":"lapse.ttl"' || true)
((n == 1)) || fail "the stream holds $n lapse.ttl records, want 1"
n=$(cli stream NetnsItems --only user 2>/dev/null | grep -c '"eventName":"INSERT"' || true)
((n == 42)) || fail "the stream holds $n INSERT records, want 42 (40 puts, soon, later)"
[[ -s $LAPSE_HOME/cluster-token ]] || fail "up made no cluster token"
if grep -l "refused Replicate" "$LAPSE_HOME"/node*.log; then
  fail "a node refused another's Replicate"
fi

# ---------------------------------------------------------------- partition and heal
"$script" partition 2 >/dev/null || fail "partition 2"
rc=0
"$script" lapse --timeout-ms 1000 scan NetnsItems >"$tmp/scan.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "a scan succeeded while node 2 was cut off"
grep -q 'node 2' "$tmp/scan.out" || fail "the scan during the partition said: $(cat "$tmp/scan.out")"
"$script" heal 2 >/dev/null || fail "heal 2"
deadline=$((SECONDS + 20))
until "$script" lapse --timeout-ms 2000 scan NetnsItems >"$tmp/scan.out" 2>&1; do
  ((SECONDS < deadline)) || fail "scan still fails 20 s after heal: $(cat "$tmp/scan.out")"
  sleep 0.2
done
[[ $(grep -c '"Id"' "$tmp/scan.out") -eq 41 ]] || fail "the scan after heal found $(grep -c '"Id"' "$tmp/scan.out") items, want 41"

# ---------------------------------------------------------------- down
"$script" down >"$tmp/down.out" 2>&1 || fail "down failed: $(cat "$tmp/down.out")"
[[ -z $(ours) ]] || fail "namespaces left after down: $(ours)"
# shellcheck source=deploy/proc.sh
source "$(dirname "$script")/proc.sh" # a zombie awaiting init's reaping has stopped
for name in "${!pids[@]}"; do
  ! proc_running "${pids[$name]}" || fail "$name (pid ${pids[$name]}) still runs after down"
done
if pgrep -f -- "--data $LAPSE_HOME/" >/dev/null; then
  fail "processes left after down: $(pgrep -af -- "--data $LAPSE_HOME/")"
fi
[[ $(ip -o link show | awk -F': ' '{print $2}' | sort) == "$links_before" ]] ||
  fail "the root namespace's links differ after down"
[[ ! -e $LAPSE_HOME/netns.state ]] || fail "down left its state file"
"$script" down >"$tmp/down2.out" 2>&1 || fail "a second down failed: $(cat "$tmp/down2.out")"
grep -q 'nothing to remove' "$tmp/down2.out" || fail "a second down said: $(cat "$tmp/down2.out")"

echo "$me: ok (${SECONDS}s)"
