#!/usr/bin/env bash
# netns_cluster_test: deploy/netns-cluster.sh runs a working cluster in
# network namespaces and `down` leaves nothing behind.
#
#   tests/netns_cluster_test.sh NETNS_SCRIPT BIN_DIR
#
# 1. refusals create nothing: not root (when runuser and user nobody exist),
#    a subnet that overlaps the root namespace's loopback;
# 2. `up` starts three etcd members (one in each node's namespace), two
#    coordinators (P-c, P-c2) and three nodes, each in its namespace and
#    listening on its namespace address only; the root namespace gains no
#    link and no address; a second `up` is harmless; from a node's
#    namespace `etcdctl endpoint health` finds the three members healthy,
#    and status names the leading coordinator;
# 3. from the coordinator's namespace: a table, 40 puts and gets, and every
#    node's /metrics (on its namespace address) counts some of the puts;
# 4. TTL: enabled, an item due in ~2 s disappears (bounded poll), an item
#    due tomorrow stays, lapse_ttl_deleted_items_total counts the deletion,
#    and the stream (hosted across namespaces, nodes sharing a cluster
#    token) holds its one lapse.ttl REMOVE and the 42 INSERTs;
# 5. kill -9 of the leading coordinator: the other one leads (bounded poll
#    of etcd's election key) and a create-table succeeds; `up` restarts the
#    dead one, which follows;
# 6. kill -9 of the etcd raft leader: puts, gets and a create-table still
#    work, no node is marked DOWN, two members stay healthy; `up` restarts
#    it and all three are healthy again;
# 7. `partition 2` (node 2 and etcd member e2 cut off) makes a scan fail
#    and the coordinators mark node 2 DOWN (its lease cannot be renewed),
#    after which a scan says "node 2 ... is down"; `heal 2` makes it UP
#    again and the scan work again;
# 8. `cut-oneway 1 3`: host 1 cannot reach host 3's metrics, hosts 3 and
#    1 still reach host 2; `heal-oneway 1` lets host 1 reach host 3 again;
# 9. `down` stops every daemon (etcd members included) and deletes every
#    namespace; the root namespace's links are as before; a second `down`
#    is a no-op.
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
  # Belt and braces: anything left with our names, or running the command
  # line the script recorded for it.
  for pidf in "$LAPSE_HOME"/*.pid; do
    [[ -f $pidf && -f ${pidf%.pid}.cmd ]] || continue
    pid=$(<"$pidf")
    if [[ $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) == "$(<"${pidf%.pid}.cmd") " ]]; then
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

etcd_urls=http://$base.11:2379,http://$base.12:2379,http://$base.13:2379
# etcdctl inside namespace $1, against every member.
etcdctl_in() {
  local ns=$1
  shift
  ip netns exec "$ns" env ETCDCTL_API=3 etcdctl --endpoints "$etcd_urls" --dial-timeout=1s \
    --command-timeout=2s "$@"
}
# Members answering `endpoint health` (a quorum write through the raft leader).
etcd_healthy() {
  etcdctl_in "$prefix-n1" endpoint health 2>&1 | grep -c ' is healthy' || true
}
# The leading coordinator's URL: its election key has the lowest create revision.
leader() {
  etcdctl_in "$prefix-c" get --prefix "/lapse/$prefix/coordinator/leader/" --sort-by=CREATE \
    --order=ASCEND --limit 1 --print-value-only 2>/dev/null | head -n 1
}
# The state the coordinators give node $1 ("UP", "DOWN"), or nothing.
node_state() {
  cli cluster-status 2>/dev/null | grep -o "\"NodeId\":$1,[^}]*" | sed -n 's/.*"State":"\([A-Z]*\)".*/\1/p'
}

declare -A want_ns=([etcd1]=$prefix-n1 [etcd2]=$prefix-n2 [etcd3]=$prefix-n3 [coordinator]=$prefix-c
  [coordinator2]=$prefix-c2 [node1]=$prefix-n1 [node2]=$prefix-n2 [node3]=$prefix-n3)
declare -A pids=()
# Records daemon $1's pid and checks that it runs in its namespace.
check_daemon() {
  local name=$1 pid
  pid=$(<"$LAPSE_HOME/$name.pid")
  pids[$name]=$pid
  kill -0 "$pid" 2>/dev/null || fail "$name (pid $pid) is not running"
  [[ $(ip netns identify "$pid") == "${want_ns[$name]}" ]] ||
    fail "$name (pid $pid) runs in '$(ip netns identify "$pid")', want ${want_ns[$name]}"
}
for name in "${!want_ns[@]}"; do check_daemon "$name"; done
for i in 1 2 3; do
  listen=$(ip netns exec "$prefix-n$i" ss -ltnH | awk '{print $4}' | sort | tr '\n' ' ')
  [[ $listen == "$base.1$i:2379 $base.1$i:2380 $base.1$i:7401 $base.1$i:9401 " ]] ||
    fail "host $i (node $i, etcd member e$i) listens on '$listen'"
done
listen=$(ip netns exec "$prefix-c" ss -ltnH | awk '{print $4}' | tr '\n' ' ')
[[ $listen == "$base.10:7400 " ]] || fail "the coordinator listens on '$listen'"
listen=$(ip netns exec "$prefix-c2" ss -ltnH | awk '{print $4}' | tr '\n' ' ')
[[ $listen == "$base.20:7400 " ]] || fail "the second coordinator listens on '$listen'"
# Each node's etcd lease is held through the members on the other hosts too.
n=$(etcd_healthy)
((n == 3)) || fail "$n of 3 etcd members healthy: $(etcdctl_in "$prefix-n1" endpoint health 2>&1)"
members=$(etcdctl_in "$prefix-n1" member list 2>&1 | awk -F', ' '{print $3 "=" $4}' | sort | tr '\n' ' ')
[[ $members == "e1=http://$base.11:2380 e2=http://$base.12:2380 e3=http://$base.13:2380 " ]] ||
  fail "etcd members: '$members'"
[[ $(ip -o link show | awk -F': ' '{print $2}' | sort) == "$links_before" ]] ||
  fail "the root namespace's links changed"
[[ $(ip -4 -o addr show | awk '{print $2, $4}' | sort) == "$addrs_before" ]] ||
  fail "the root namespace's addresses changed"
"$script" up --bin-dir "$bin" >"$tmp/up2.out" 2>&1 || fail "a second up failed: $(cat "$tmp/up2.out")"
grep -q 'coordinator already running' "$tmp/up2.out" || fail "a second up said: $(cat "$tmp/up2.out")"
"$script" status >"$tmp/status.out" 2>&1 || fail "status failed"
for ns in "$prefix-br" "$prefix-c" "$prefix-c2" "$prefix-n1" "$prefix-n2" "$prefix-n3"; do
  grep -q "^namespace $ns:" "$tmp/status.out" || fail "status does not show $ns"
done
[[ $(grep -c ' is healthy' "$tmp/status.out") -eq 3 ]] ||
  fail "status does not show three healthy etcd members: $(cat "$tmp/status.out")"
grep -q "^leading coordinator: tcp://$base\.[12]0:7400 " "$tmp/status.out" ||
  fail "status does not name the leading coordinator: $(cat "$tmp/status.out")"
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

# Creates table $1 through whichever coordinator answers, polling (bounded)
# while the control plane recovers. A try cut off mid-way may have created it:
# "already exists" after a failed try counts as done.
create_polled() {
  local table=$1 deadline=$((SECONDS + 20)) tried=0 out
  while :; do
    if out=$(cli create-table "$table" --partition-key Id:S --partitions 8 2>&1); then
      break
    fi
    ((tried && $(grep -c 'already exists' <<<"$out") > 0)) && break
    tried=1
    ((SECONDS < deadline)) || fail "create-table $table still fails after 20 s: $out"
    sleep 0.2
  done
  cli describe-table "$table" | grep -q "\"$table\"" || fail "describe-table $table: $(cli describe-table "$table" 2>&1)"
  cli put "$table" '{"Id":{"S":"x"},"v":{"N":"1"}}' >/dev/null || fail "put into $table"
  [[ $(cli get "$table" '{"Id":{"S":"x"}}') == *'"v":{"N":"1"}'* ]] || fail "get from $table"
}

# ---------------------------------------------------------------- kill -9 of the leading coordinator
lead=$(leader)
case $lead in
  "tcp://$base.10:7400") victim=coordinator survivor_url=tcp://$base.20:7400 ;;
  "tcp://$base.20:7400") victim=coordinator2 survivor_url=tcp://$base.10:7400 ;;
  *) fail "no coordinator leads: the election key holds '$lead'" ;;
esac
kill -KILL "${pids[$victim]}"
t0=$SECONDS
deadline=$((SECONDS + 15))
until [[ $(leader) == "$survivor_url" ]]; do
  ((SECONDS < deadline)) || fail "after kill -9 of $victim ($lead), the leader is '$(leader)' 15 s later"
  sleep 0.1
done
echo "$me: kill -9 of $victim ($lead): $survivor_url leads within $((SECONDS - t0))-$((SECONDS - t0 + 1)) s"
create_polled AfterLeaderKill
"$script" up --bin-dir "$bin" >"$tmp/up3.out" 2>&1 || fail "up after the kill failed: $(cat "$tmp/up3.out")"
grep -q "^started $victim " "$tmp/up3.out" || fail "up did not restart $victim: $(cat "$tmp/up3.out")"
check_daemon "$victim"
# The election key as etcd answers it; empty while etcd is stalled (a slow
# fdatasync on a busy disk once held its quorum ~3 s): asked again.
now_lead=$(leader)
deadline=$((SECONDS + 15))
until [[ -n $now_lead ]]; do
  ((SECONDS < deadline)) || fail "etcd did not answer who leads 15 s after $victim restarted"
  sleep 0.2
  now_lead=$(leader)
done
survivor=coordinator2
[[ $victim == coordinator2 ]] && survivor=coordinator
if [[ $now_lead != "$survivor_url" ]]; then
  # A survivor that lost its etcd lease (etcd stalled past the lease) gave
  # up the lead; then either may win the next election.
  grep -q "etcd lease .* lost" "$LAPSE_HOME/$survivor.log" ||
    fail "the restarted $victim took the lead from $survivor_url: $now_lead"
  echo "$me: $survivor_url lost its etcd lease (etcd stalled), and $now_lead leads now"
fi

# ---------------------------------------------------------------- kill -9 of the etcd raft leader
# `endpoint status` (simple): "URL, ID, VERSION, DB SIZE, IS LEADER, ...".
etcd_lead=$(etcdctl_in "$prefix-c" endpoint status 2>/dev/null | awk -F', ' '$5 == "true" {print $1}')
member=${etcd_lead#"http://$base.1"}
member=${member%:2379}
[[ $member =~ ^[123]$ ]] || fail "no etcd raft leader found: '$etcd_lead'"
downs_before=$(cat "$LAPSE_HOME"/coordinator*.log | grep -c ' is DOWN' || true)
kill -KILL "${pids[etcd$member]}"
echo "$me: kill -9 of etcd member e$member (the raft leader)"
for i in $(seq 41 60); do
  cli put NetnsItems "{\"Id\":{\"S\":\"k$i\"},\"v\":{\"N\":\"$i\"}}" >/dev/null || fail "put k$i without e$member"
done
for i in $(seq 41 60); do
  out=$(cli get NetnsItems "{\"Id\":{\"S\":\"k$i\"}}") || fail "get k$i without e$member"
  [[ $out == *"\"v\":{\"N\":\"$i\"}"* ]] || fail "get k$i without e$member returned $out"
done
create_polled AfterEtcdKill
n=$(etcd_healthy)
((n == 2)) || fail "$n etcd members healthy with e$member killed, want 2"
for i in 1 2 3; do
  [[ $(node_state "$i") == UP ]] || fail "node $i is $(node_state "$i") with e$member killed"
done
downs_after=$(cat "$LAPSE_HOME"/coordinator*.log | grep -c ' is DOWN' || true)
((downs_after == downs_before)) ||
  fail "a node was marked DOWN while e$member was dead: $(grep ' is DOWN' "$LAPSE_HOME"/coordinator*.log)"
"$script" up --bin-dir "$bin" >"$tmp/up4.out" 2>&1 || fail "up after the etcd kill failed: $(cat "$tmp/up4.out")"
grep -q "^started etcd$member " "$tmp/up4.out" || fail "up did not restart etcd$member: $(cat "$tmp/up4.out")"
check_daemon "etcd$member"
deadline=$((SECONDS + 20))
until (($(etcd_healthy) == 3)); do
  ((SECONDS < deadline)) || fail "e$member not healthy 20 s after its restart"
  sleep 0.2
done

# ---------------------------------------------------------------- partition and heal
"$script" partition 2 >/dev/null || fail "partition 2"
rc=0
"$script" lapse --timeout-ms 1000 scan NetnsItems >"$tmp/scan.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "a scan succeeded while node 2 was cut off"
grep -q 'node 2' "$tmp/scan.out" || fail "the scan during the partition said: $(cat "$tmp/scan.out")"
# Node 2 cannot reach a quorum of etcd (its own member e2 is cut off with
# it): its lease runs out and the coordinators mark it DOWN.
t0=$SECONDS
deadline=$((SECONDS + 15))
until [[ $(node_state 2) == DOWN ]]; do
  ((SECONDS < deadline)) || fail "node 2 is '$(node_state 2)' 15 s after the partition, want DOWN"
  sleep 0.2
done
echo "$me: node 2 cut off: DOWN within $((SECONDS - t0))-$((SECONDS - t0 + 1)) s"
[[ $(node_state 1) == UP && $(node_state 3) == UP ]] || fail "nodes 1 and 3 not UP during the partition"
# With node 2 DOWN in the map, a client fails its partitions by name
# instead of timing out on them.
rc=0
cli scan NetnsItems >"$tmp/scan.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "a scan succeeded while node 2 was DOWN"
grep -q "node 2 (tcp://$base.12:7401) is down" "$tmp/scan.out" ||
  fail "the scan while node 2 was DOWN said: $(cat "$tmp/scan.out")"
"$script" heal 2 >/dev/null || fail "heal 2"
t0=$SECONDS
deadline=$((SECONDS + 20))
until [[ $(node_state 2) == UP ]]; do
  ((SECONDS < deadline)) || fail "node 2 is '$(node_state 2)' 20 s after heal, want UP"
  sleep 0.2
done
echo "$me: node 2 healed: UP within $((SECONDS - t0))-$((SECONDS - t0 + 1)) s"
deadline=$((SECONDS + 20))
until "$script" lapse --timeout-ms 2000 scan NetnsItems >"$tmp/scan.out" 2>&1; do
  ((SECONDS < deadline)) || fail "scan still fails 20 s after heal: $(cat "$tmp/scan.out")"
  sleep 0.2
done
[[ $(grep -c '"Id"' "$tmp/scan.out") -eq 61 ]] ||
  fail "the scan after heal found $(grep -c '"Id"' "$tmp/scan.out") items, want 61 (k1..k60, later)"

# ---------------------------------------------------------------- one-way cut
# Host 1 drops what it sends host 3; host 3 still reaches host 1, and
# host 1 still reaches host 2. Probed with node metrics (HTTP on :9401).
metrics_from() { # from-host to-host
  ip netns exec "$prefix-n$1" curl -s -m 2 -o /dev/null "http://$base.1$2:9401/metrics"
}
"$script" cut-oneway 1 3 >/dev/null || fail "cut-oneway 1 3"
! metrics_from 1 3 || fail "host 1 reached host 3 through the one-way cut"
metrics_from 3 2 || fail "host 3 cannot reach host 2 during the one-way cut"
metrics_from 1 2 || fail "host 1 cannot reach host 2 during its cut to host 3"
"$script" heal-oneway 1 >/dev/null || fail "heal-oneway 1"
metrics_from 1 3 || fail "host 1 cannot reach host 3 after heal-oneway"

# ---------------------------------------------------------------- down
"$script" down >"$tmp/down.out" 2>&1 || fail "down failed: $(cat "$tmp/down.out")"
[[ -z $(ours) ]] || fail "namespaces left after down: $(ours)"
# shellcheck source=deploy/proc.sh
source "$(dirname "$script")/proc.sh" # a zombie awaiting init's reaping has stopped
for name in "${!pids[@]}"; do
  ! proc_running "${pids[$name]}" || fail "$name (pid ${pids[$name]}) still runs after down"
done
if pgrep -f -- "$LAPSE_HOME/" >/dev/null; then
  fail "processes left after down: $(pgrep -af -- "$LAPSE_HOME/")"
fi
[[ $(ip -o link show | awk -F': ' '{print $2}' | sort) == "$links_before" ]] ||
  fail "the root namespace's links differ after down"
[[ ! -e $LAPSE_HOME/netns.state ]] || fail "down left its state file"
"$script" down >"$tmp/down2.out" 2>&1 || fail "a second down failed: $(cat "$tmp/down2.out")"
grep -q 'nothing to remove' "$tmp/down2.out" || fail "a second down said: $(cat "$tmp/down2.out")"

echo "$me: ok (${SECONDS}s)"
