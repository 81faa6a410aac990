#!/usr/bin/env bash
# local_cluster_test: `make cluster` (deploy/local-cluster.sh, the README's
# first command) starts a working three-node cluster and `make cluster-down`
# stops exactly what it started.
#
#   tests/local_cluster_test.sh LOCAL_CLUSTER_SCRIPT BIN_DIR
#
# 1. a bad LAPSE_PORT is refused (exit 2) and starts nothing;
# 2. `up` (on free ports through LAPSE_PORT and LAPSE_METRICS_PORT, data
#    under a fresh LAPSE_HOME) starts three etcd members, two coordinators
#    on them (it names the leader), three nodes and the DynamoDB gateway
#    (on LAPSE_PORT+40, which `up` prints); exits 0 with three nodes UP, node i on
#    LAPSE_PORT+i with metrics on LAPSE_METRICS_PORT+i, makes the cluster
#    token (mode 0600) and starts every node with it, writes
#    $LAPSE_HOME/prometheus.yml scraping those metrics ports (valid for
#    promtool, when installed) and names it in its hints; a second `up`
#    starts nothing new, nor does `ensure` (make demo's), which prints one
#    line instead of the status and hints;
# 2b. idle, each node uses under a quarter of a core's time;
# 3. through the lapse CLI: a table with a stream, puts and gets, TTL
#    enabled; an item due in ~2 s is deleted (bounded poll), an item due
#    tomorrow stays, node metrics count the deletion, and the stream holds
#    the item's lapse.ttl REMOVE (a Replicate between token-sharing nodes);
#    Counters' HELP says they restart at 0 with the node.
# 3b. kill -9 of the leading coordinator: the CLI (given both) goes on; a
#    second `up` restarts exactly the dead one;
# 3c. a table created without --replication keeps 3 copies; kill -9 of
#    node 1: every key is read and written again within the CLI's retries,
#    and `up` restarts just node 1;
# 3d. LAPSE_NODES=4 `up` starts node 4 alone; it registers, and the
#    rebalancer moves copies of the older tables to it (rebalance --dry-run
#    plans them, cluster-status counts them);
# 4. `down` stops the ten processes (their pids are gone) within 3 s (a
#    daemon exits within milliseconds of SIGTERM; nodes stop at once, since
#    one stopping after a peer could wait out a 2 s replication round to it;
#    `down` once waited on
#    each one's zombie until init reaped it, ~2 s apiece here), a second
#    `down` says nothing is running.
# A trap kills what is left on failure. Ports are picked at random below the
# ephemeral range among those nothing listens on; when one is taken before
# its daemon binds it, `up` is run again on new ports.
set -euo pipefail

script=$1 bin=$2
me=local_cluster_test
tmp_root=${LAPSE_TEST_TMP:-/tmp}
mkdir -p "$tmp_root"
tmp=$(mktemp -d "$tmp_root/local_cluster_test.XXXXXX")
export LAPSE_HOME=$tmp/home

cleanup() {
  local rc=$? pidf pid
  # Every process `up` started: its command line is the one it recorded
  # (coordinators on etcd name no path under LAPSE_HOME).
  for pidf in "$LAPSE_HOME"/*.pid; do
    [[ -f $pidf && -f ${pidf%.pid}.cmd ]] || continue
    pid=$(<"$pidf")
    if [[ -r /proc/$pid/cmdline && $(tr '\0' ' ' <"/proc/$pid/cmdline") == "$(<"${pidf%.pid}.cmd") " ]]; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  if ((rc != 0)); then
    for f in "$LAPSE_HOME"/*.log; do
      [[ -f $f ]] || continue
      echo "--- $f (last 20 lines)" >&2
      tail -n 20 "$f" >&2
    done
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT

fail() {
  echo "$me: FAIL: $*" >&2
  exit 1
}

listening() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# A base port b with b..b+n-1 all free, below the kernel's ephemeral range
# (where the other tests' harness picks its ports by binding to port 0, and
# where outgoing connections get theirs).
ephemeral_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
((ephemeral_low > 12000)) || ephemeral_low=32768
free_base() {
  local n=$1 b i tries
  for tries in $(seq 50); do
    b=$((10000 + RANDOM % (ephemeral_low - 10010)))
    for ((i = 0; i < n; i++)); do
      listening $((b + i)) && continue 2
    done
    echo "$b"
    return 0
  done
  fail "no free ports found"
}

# 1. refusal
if LAPSE_PORT=x "$script" up "$bin" >"$tmp/bad.out" 2>&1; then
  fail "up accepted LAPSE_PORT=x"
fi
grep -q "bad port" "$tmp/bad.out" || fail "no clear message for a bad port: $(cat "$tmp/bad.out")"
[[ ! -e $LAPSE_HOME ]] || fail "a refused up created $LAPSE_HOME"

# 2. up; a daemon that lost its port to another process between the pick
# and its bind ("address in use" in its log) means new ports, at most 3 times.
for attempt in 1 2 3; do
  export LAPSE_PORT=$(free_base 41) # coordinators +0, +10; nodes +1..3; etcd +20..22, +30..32; gateway +40
  # node i's metrics on LAPSE_METRICS_PORT+i, +34..+37 of the same free block
  # (node 4 joins in 3d), so no second pick can overlap the first.
  export LAPSE_METRICS_PORT=$((LAPSE_PORT + 33))
  coord=tcp://127.0.0.1:$LAPSE_PORT,tcp://127.0.0.1:$((LAPSE_PORT + 10))
  "$script" up "$bin" >"$tmp/up.out" 2>&1 && break
  grep -qis "address in use" "$LAPSE_HOME"/*.log || fail "up failed: $(cat "$tmp/up.out")"
  ((attempt < 3)) || fail "up lost its ports three times: $(cat "$tmp/up.out")"
  echo "$me: a port was taken meanwhile; again on new ports" >&2
  "$script" down >/dev/null 2>&1 || true
  rm -rf "$LAPSE_HOME"
done
n=$(grep -o '"State": *"UP"' "$tmp/up.out" | wc -l)
((n == 3)) || fail "up printed $n UP nodes, want 3"
grep -q "export LAPSE_COORDINATOR=$coord" "$tmp/up.out" || fail "up's hints do not name the coordinators"
grep -q "DynamoDB API: http://127.0.0.1:$((LAPSE_PORT + 40)) " "$tmp/up.out" ||
  fail "up does not print the DynamoDB gateway on LAPSE_PORT+40: $(grep -i dynamodb "$tmp/up.out")"
grep -Eq "^leading coordinator: tcp://127.0.0.1:($LAPSE_PORT|$((LAPSE_PORT + 10))) " "$tmp/up.out" ||
  fail "up does not say which coordinator leads: $(grep leading "$tmp/up.out")"
token=$LAPSE_HOME/cluster-token
[[ -s $token ]] || fail "no cluster token"
[[ $(stat -c %a "$token") == 600 ]] || fail "cluster token mode $(stat -c %a "$token"), want 600"
names=(etcd1 etcd2 etcd3 coordinator coordinator2 node1 node2 node3 dynamodb)
pids=()
for name in "${names[@]}"; do
  pid=$(<"$LAPSE_HOME/$name.pid")
  [[ -r /proc/$pid/cmdline ]] || fail "$name (pid $pid) is not running"
  pids+=("$pid")
  if [[ $name == node* ]]; then
    i=${name#node}
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline")
    grep -q -- "--cluster-token-file $token" <<<"$cmdline" ||
      fail "$name was started without the cluster token"
    grep -q -- "--listen tcp://127.0.0.1:$((LAPSE_PORT + i)) " <<<"$cmdline" ||
      fail "$name is not on LAPSE_PORT+$i: $cmdline"
    grep -q -- "--metrics-listen 127.0.0.1:$((LAPSE_METRICS_PORT + i)) " <<<"$cmdline" ||
      fail "$name's metrics are not on LAPSE_METRICS_PORT+$i: $cmdline"
  fi
done
prom=$LAPSE_HOME/prometheus.yml
[[ -s $prom ]] || fail "up wrote no $prom"
for i in 1 2 3; do
  grep -q "targets: \['127.0.0.1:$((LAPSE_METRICS_PORT + i))'\]" "$prom" ||
    fail "$prom does not scrape node $i on $((LAPSE_METRICS_PORT + i)): $(grep targets "$prom")"
done
(($(grep -c "targets:" "$prom") == 3)) || fail "$prom has other targets: $(grep targets "$prom")"
grep -q -- "--config.file=$prom" "$tmp/up.out" || fail "up's Prometheus hint does not name $prom"
if command -v promtool >/dev/null 2>&1; then
  promtool check config "$prom" >"$tmp/promtool.out" 2>&1 || fail "promtool: $(cat "$tmp/promtool.out")"
fi
"$script" up "$bin" >"$tmp/up2.out" 2>&1 || fail "second up failed: $(cat "$tmp/up2.out")"
n=$(grep -c "already running" "$tmp/up2.out" || true)
((n == 9)) || fail "second up: $n of 9 already running: $(cat "$tmp/up2.out")"
"$script" ensure "$bin" >"$tmp/ensure.out" 2>&1 || fail "ensure failed: $(cat "$tmp/ensure.out")"
(($(wc -l <"$tmp/ensure.out") == 1)) || fail "ensure printed more than a line: $(cat "$tmp/ensure.out")"
grep -q "coordinators $coord" "$tmp/ensure.out" || fail "ensure: $(cat "$tmp/ensure.out")"
for i in "${!names[@]}"; do
  [[ $(<"$LAPSE_HOME/${names[i]}.pid") == "${pids[i]}" ]] || fail "second up or ensure restarted ${names[i]}"
done

# 2b. idle nodes sleep: over 2 s an idle node uses under a quarter of a core
# (a background thread whose timed wait never waited once spun at ~60 % on
# each node and starved the machine).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
declare -A t0
for name in node1 node2 node3; do t0[$name]=$(cpu_ticks "$(<"$LAPSE_HOME/$name.pid")"); done
sleep 2
for name in node1 node2 node3; do
  used=$(($(cpu_ticks "$(<"$LAPSE_HOME/$name.pid")") - t0[$name]))
  ((used * 4 < hz * 2)) || fail "idle $name used $used of $((hz * 2)) clock ticks in 2 s"
done

# 3. the cluster works
lapse() { "$bin/lapse" --coordinator "$coord" "$@"; }
lapse create-table Sessions --partition-key Id:S --stream on >/dev/null
now=$(date +%s)
lapse put Sessions '{"Id":{"S":"soon"},"Exp":{"N":"'$((now + 2))'"}}'
lapse put Sessions '{"Id":{"S":"later"},"Exp":{"N":"'$((now + 86400))'"}}'
lapse get Sessions '{"Id":{"S":"later"}}' | grep -q '"later"' || fail "get after put"
lapse update-ttl Sessions --enable --attribute Exp >/dev/null
for _ in $(seq 100); do
  lapse describe-ttl Sessions | grep -q '"ENABLED"' && break
  sleep 0.1
done
lapse describe-ttl Sessions | grep -q '"ENABLED"' || fail "TTL did not turn ENABLED"
gone=0
for _ in $(seq 100); do
  if ! lapse get Sessions '{"Id":{"S":"soon"}}' | grep -q '"soon"'; then
    gone=1
    break
  fi
  sleep 0.1
done
((gone)) || fail "the item due in 2 s is still there 10 s later"
lapse get Sessions '{"Id":{"S":"later"}}' | grep -q '"later"' || fail "the item due tomorrow was deleted"
deleted=0
for i in 1 2 3; do
  port=$((LAPSE_METRICS_PORT + i))
  (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3) \
    >"$tmp/metrics$i" || fail "no metrics on node $i's port $port"
  v=$(awk '/^lapse_ttl_deleted_items_total\{table="Sessions"\}/ {print $2}' "$tmp/metrics$i")
  deleted=$((deleted + ${v:-0}))
  grep -q "^# HELP lapse_rpc_requests_total .*restarts at 0" "$tmp/metrics$i" ||
    fail "node $i: the counters' help does not say they restart at 0: $(grep '^# HELP lapse_rpc' "$tmp/metrics$i")"
done
((deleted == 1)) || fail "nodes' metrics count $deleted TTL deletions, want 1"
grep -q "^# HELP lapse_ttl_deleted_items_total .*restarts at 0" "$tmp"/metrics* ||
  fail "lapse_ttl_deleted_items_total's help does not say it restarts at 0"
removes=0
for _ in $(seq 50); do
  removes=$(lapse stream Sessions --only ttl 2>/dev/null | grep -c "\"REMOVE\"" || true)
  ((removes >= 1)) && break
  sleep 0.1
done
((removes == 1)) || fail "the stream holds $removes lapse.ttl REMOVEs, want 1"
if grep -qi "EPERM\|refus" "$LAPSE_HOME"/node*.log; then
  fail "a node refused a Replicate: $(grep -hi 'EPERM\|refus' "$LAPSE_HOME"/node*.log | head -3)"
fi

# 3b. the leading coordinator dies: calls go on through the other, and `up`
# restarts just that one.
leader=$(sed -n 's/^leading coordinator: \(tcp:[^ ]*\) .*/\1/p' "$tmp/up.out")
[[ $leader == "tcp://127.0.0.1:$LAPSE_PORT" ]] && dead=coordinator || dead=coordinator2
kill -KILL "$(<"$LAPSE_HOME/$dead.pid")"
ok=0
for _ in $(seq 100); do
  if lapse create-table AfterFailover --partition-key Id:S >/dev/null 2>&1; then ok=1; break; fi
  sleep 0.1
done
((ok)) || fail "no create-table within 10 s of killing the leading coordinator ($dead)"
lapse put AfterFailover '{"Id":{"S":"x"}}' || fail "put after the failover"
lapse list-tables | grep -q '"AfterFailover"' || fail "list-tables after the failover"
"$script" up "$bin" >"$tmp/up3.out" 2>&1 || fail "up after the kill failed: $(cat "$tmp/up3.out")"
grep -q "^started $dead " "$tmp/up3.out" || fail "up did not restart $dead: $(cat "$tmp/up3.out")"
n=$(grep -c "already running" "$tmp/up3.out" || true)
((n == 8)) || fail "up after the kill: $n of 8 already running: $(cat "$tmp/up3.out")"
for i in "${!names[@]}"; do
  [[ ${names[i]} == "$dead" ]] && pids[i]=$(<"$LAPSE_HOME/$dead.pid")
done

# 3c. tables keep three copies (the coordinators' --default-replication 3):
# kill -9 of a node costs seconds, and every key is read and written again
# through the CLI (its calls retry within their 5 s); `up` restarts just
# that node.
lapse describe-table Sessions | grep -q '"Replication":3' ||
  fail "Sessions, created without --replication, does not keep 3 copies: $(lapse describe-table Sessions)"
for k in $(seq 0 23); do lapse put Sessions '{"Id":{"S":"r'$k'"},"V":{"S":"a"}}' >/dev/null; done
kill -KILL "$(<"$LAPSE_HOME/node1.pid")"
for k in $(seq 0 23); do
  lapse get Sessions '{"Id":{"S":"r'$k'"}}' | grep -q '"a"' || fail "r$k not read after kill -9 of node 1"
  lapse put Sessions '{"Id":{"S":"r'$k'"},"V":{"S":"b"}}' >/dev/null || fail "r$k not written after kill -9 of node 1"
done
"$script" up "$bin" >"$tmp/up4.out" 2>&1 || fail "up after the node kill failed: $(cat "$tmp/up4.out")"
grep -q "^started node1 " "$tmp/up4.out" || fail "up did not restart node1: $(cat "$tmp/up4.out")"
for i in "${!names[@]}"; do
  [[ ${names[i]} == node1 ]] && pids[i]=$(<"$LAPSE_HOME/node1.pid")
done
for k in $(seq 0 23); do
  lapse get Sessions '{"Id":{"S":"r'$k'"}}' | grep -q '"b"' || fail "r$k lost its acknowledged write"
done

# 3d. a fourth node joins the running cluster (LAPSE_NODES=4 make cluster):
# `up` starts just node 4, which registers; the rebalancer plans moves of
# the older tables' copies to it (`lapse rebalance --dry-run`, every move
# to node 4) and carries them out, so node 4 soon holds more than the 6
# copies a new 8-partition table gives it (cluster-status's Replicas,
# counted from the map).
LAPSE_NODES=4 "$script" up "$bin" >"$tmp/up5.out" 2>&1 || fail "LAPSE_NODES=4 up failed: $(cat "$tmp/up5.out")"
grep -q "^started node4 " "$tmp/up5.out" || fail "LAPSE_NODES=4 up did not start node4: $(cat "$tmp/up5.out")"
n=$(grep -c "^started" "$tmp/up5.out" || true)
((n == 1)) || fail "LAPSE_NODES=4 up started $n processes, want node4 alone: $(cat "$tmp/up5.out")"
n=$(grep -o '"State": *"UP"' "$tmp/up5.out" | wc -l)
((n == 4)) || fail "LAPSE_NODES=4 up printed $n UP nodes, want 4"
names+=(node4)
pids+=("$(<"$LAPSE_HOME/node4.pid")")
lapse rebalance --dry-run >"$tmp/plan4.json" || fail "rebalance --dry-run failed"
python3 - "$tmp/plan4.json" <<'PY' || fail "the rebalancer's plan: $(cat "$tmp/plan4.json")"
import json, sys
plan = json.load(open(sys.argv[1]))
assert all(m["To"] == 4 for m in plan["Moves"]), plan
assert len(plan["Moves"]) + plan["Moving"] > 0, plan  # node 4 is empty: moves to make
PY
lapse create-table Grown --partition-key Id:S --partitions 8 >/dev/null
grown=0
for _ in $(seq 300); do
  lapse cluster-status >"$tmp/status4.json"
  if python3 - "$tmp/status4.json" <<'PY'; then grown=1; break; fi
import json, sys
nodes = {n["NodeId"]: n for n in json.load(open(sys.argv[1]))["Nodes"]}
assert len(nodes) == 4 and all(n["State"] == "UP" for n in nodes.values()), nodes
sys.exit(0 if nodes[4]["Replicas"] > 6 else 1)
PY
  sleep 0.2
done
((grown)) || fail "node 4 got no copy of the older tables within 60 s: $(cat "$tmp/status4.json")"
for k in $(seq 0 15); do lapse put Grown '{"Id":{"S":"g'$k'"}}' >/dev/null || fail "put g$k to Grown"; done

# 4. down
t0=$(date +%s%N)
"$script" down >"$tmp/down.out" 2>&1 || fail "down failed: $(cat "$tmp/down.out")"
down_ms=$((($(date +%s%N) - t0) / 1000000))
echo "local_cluster_test: down stopped the ten daemons in $down_ms ms"
# A bound on a hang (a daemon waiting out a lease or a timeout), not a speed
# target: those live in bench/. The last node up can take a round timeout
# (2 s) to stop, more under the sanitizers (3,065 ms once).
((down_ms < 10000)) || fail "down took $down_ms ms for ten daemons, want under 10000 (a hang?)"
n=$(grep -c "^stopped" "$tmp/down.out" || true)
((n == 10)) || fail "down stopped $n of 10 (node 4 included, without LAPSE_NODES): $(cat "$tmp/down.out")"
# shellcheck source=deploy/proc.sh
source "$(dirname "$script")/proc.sh"
for pid in "${pids[@]}"; do
  ! proc_running "$pid" || fail "pid $pid still running after down"
done
"$script" down >"$tmp/down2.out" 2>&1 || fail "second down failed"
grep -q "no local cluster running" "$tmp/down2.out" || fail "second down: $(cat "$tmp/down2.out")"
echo "$me: ok"
