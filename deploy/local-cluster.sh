#!/usr/bin/env bash
# A local Lapse cluster on loopback, for trying Lapse out: a three-member
# etcd, two coordinators keeping the catalog in it (one leads, the other
# forwards to it and takes over when it dies), and three nodes. A table
# keeps three copies of each partition unless its create-table says
# otherwise (--default-replication 3, or LAPSE_REPLICATION=1|2|3, e.g. for
# a benchmark of one copy), so a node's death costs seconds.
#
#   deploy/local-cluster.sh up [BIN_DIR]     start (or confirm running), wait for registration,
#                                            print the status and commands to try
#   deploy/local-cluster.sh ensure [BIN_DIR] the same, printing one line (make demo)
#   deploy/local-cluster.sh down             stop exactly the processes `up` started
#   deploy/local-cluster.sh status           show which are running
#
# LAPSE_NODES=N (3 to 9, default 3) runs nodes 1..N: `LAPSE_NODES=4 make
# cluster` on a running three-node cluster starts node 4, which registers
# and takes its share of the tables created from then on. `down` and
# `status` cover every node `up` started, whatever LAPSE_NODES says then.
# LAPSE_ZONES=a,a,b,... gives node i the i-th zone (--zone; empty or past
# the list: none), to try zone-aware placement (docs/replication.md, "Zones").
#
# Ports, both moved by a base (tests pick free ones), node i at base + i:
#   LAPSE_PORT=N (default 7400)          coordinators on tcp://127.0.0.1:N and N+10,
#                                        node i on N+i, etcd member i's client
#                                        URL on N+19+i and its peer URL on N+29+i
#   LAPSE_METRICS_PORT=M (default 9400)  node i's Prometheus metrics on
#                                        http://127.0.0.1:(M+i)/metrics
# The DynamoDB-compatible gateway (lapse-dynamodb, docs/dynamodb-api.md)
# listens on http://127.0.0.1:8000 (DynamoDB Local's port), or on N+40 when
# LAPSE_PORT is set, or on LAPSE_DYNAMODB_PORT when that is set. With
# LAPSE_DYNAMODB_CREDENTIALS=FILE it verifies SigV4 signatures against FILE's
# access keys (lines "ACCESS_KEY_ID SECRET"); without, any signature works.
# `up` writes $LAPSE_HOME/prometheus.yml, deploy/prometheus.yml with the
# targets of the ports in use. The nodes' shared cluster token is in
# $LAPSE_HOME/cluster-token. Data, logs and pid files live under $LAPSE_HOME
# (default .lapse in the current directory). Running `up` again restarts
# whichever of its processes died; `down` only signals processes whose pid
# file it wrote and whose command line is still the one it started, never
# others.
set -euo pipefail

home=${LAPSE_HOME:-$PWD/.lapse}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=deploy/proc.sh
source "$here/proc.sh"
bin=${2:-$PWD/build/bin}
[[ -d $bin ]] && bin=$(cd "$bin" && pwd)
coord_port=${LAPSE_PORT:-7400}
metrics_base=${LAPSE_METRICS_PORT:-9400}
[[ $coord_port =~ ^[0-9]+$ ]] && ((coord_port >= 1 && coord_port <= 65532)) ||
  { echo "local-cluster: bad port $coord_port (LAPSE_PORT: 1 to 65532)" >&2; exit 2; }
[[ $metrics_base =~ ^[0-9]+$ ]] && ((metrics_base >= 0 && metrics_base <= 65532)) ||
  { echo "local-cluster: bad port $metrics_base (LAPSE_METRICS_PORT: 0 to 65532)" >&2; exit 2; }
nnodes=${LAPSE_NODES:-3}
IFS=, read -r -a zones <<<"${LAPSE_ZONES:-}"
replication=${LAPSE_REPLICATION:-3}
[[ $replication == [123] ]] || { echo "local-cluster.sh: LAPSE_REPLICATION wants 1, 2 or 3" >&2; exit 2; }
[[ $nnodes =~ ^[3-9]$ ]] ||
  { echo "local-cluster: bad node count $nnodes (LAPSE_NODES: 3 to 9)" >&2; exit 2; }
node_ports=() metrics_ports=()
for ((i = 1; i <= 9; i++)); do
  node_ports+=($((coord_port + i)))
  metrics_ports+=($((metrics_base + i)))
done
coord2_port=$((coord_port + 10))
if [[ -n ${LAPSE_DYNAMODB_PORT:-} ]]; then
  dynamodb_port=$LAPSE_DYNAMODB_PORT
elif [[ -n ${LAPSE_PORT:-} ]]; then
  dynamodb_port=$((coord_port + 40))
else
  dynamodb_port=8000
fi
[[ $dynamodb_port =~ ^[0-9]+$ ]] && ((dynamodb_port >= 1 && dynamodb_port <= 65535)) ||
  { echo "local-cluster: bad port $dynamodb_port (LAPSE_DYNAMODB_PORT: 1 to 65535)" >&2; exit 2; }
coord_url="tcp://127.0.0.1:$coord_port,tcp://127.0.0.1:$coord2_port"
etcd_client_ports=($((coord_port + 20)) $((coord_port + 21)) $((coord_port + 22)))
etcd_peer_ports=($((coord_port + 30)) $((coord_port + 31)) $((coord_port + 32)))
etcd_urls="http://127.0.0.1:${etcd_client_ports[0]},http://127.0.0.1:${etcd_client_ports[1]},http://127.0.0.1:${etcd_client_ports[2]}"
etcd_initial="e1=http://127.0.0.1:${etcd_peer_ports[0]},e2=http://127.0.0.1:${etcd_peer_ports[1]},e3=http://127.0.0.1:${etcd_peer_ports[2]}"
cluster_name=local
names=(etcd1 etcd2 etcd3 coordinator coordinator2)
for ((i = 1; i <= nnodes; i++)); do names+=("node$i"); done
names+=(dynamodb)
# Every name `up` may have started, for down and status.
all_names=(etcd1 etcd2 etcd3 coordinator coordinator2 node1 node2 node3 node4 node5 node6 node7 node8 node9 dynamodb)

# Prints the pid in $1's pid file when that process is alive and is ours:
# its command line is the one `start` recorded beside the pid file.
live_pid() {
  local pidfile=$1 pid
  [[ -f $pidfile && -f ${pidfile%.pid}.cmd ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  proc_running "$pid" || return 1
  [[ $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) == "$(<"${pidfile%.pid}.cmd") " ]] || return 1
  echo "$pid"
}

port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
  local name=$1; shift
  local pidfile="$home/$name.pid" log="$home/$name.log"
  if live_pid "$pidfile" >/dev/null; then
    echo "$name already running (pid $(<"$pidfile"))"
    return 0
  fi
  setsid "$@" >>"$log" 2>&1 </dev/null &
  echo $! >"$pidfile"
  echo "$*" >"$home/$name.cmd"
  echo "started $name (pid $!), log $log"
}

# The process each name stands for, as "port to check" and the command.
ports_of() {
  case $1 in
    etcd*) local i=${1#etcd}; echo "${etcd_client_ports[i-1]} ${etcd_peer_ports[i-1]}" ;;
    coordinator) echo "$coord_port" ;;
    coordinator2) echo "$coord2_port" ;;
    node*) local i=${1#node}; echo "${node_ports[i-1]} ${metrics_ports[i-1]}" ;;
    dynamodb) echo "$dynamodb_port" ;;
  esac
}

start_named() {
  local name=$1 i
  case $name in
    etcd*)
      i=${name#etcd}
      start "$name" "$etcd_bin" --name "e$i" --data-dir "$home/$name" \
        --listen-client-urls "http://127.0.0.1:${etcd_client_ports[i-1]}" \
        --advertise-client-urls "http://127.0.0.1:${etcd_client_ports[i-1]}" \
        --listen-peer-urls "http://127.0.0.1:${etcd_peer_ports[i-1]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${etcd_peer_ports[i-1]}" \
        --initial-cluster "$etcd_initial" --initial-cluster-token "lapse-$coord_port" \
        --initial-cluster-state new --heartbeat-interval 50 --election-timeout 500 \
        --logger zap --log-level warn ;;
    coordinator | coordinator2)
      [[ $name == coordinator ]] && i=$coord_port || i=$coord2_port
      start "$name" "$bin/lapse-coordinator" --listen "tcp://127.0.0.1:$i" --etcd "$etcd_urls" \
        --cluster-name "$cluster_name" --default-replication "$replication" ;;
    node*)
      i=${name#node}
      zone=${zones[i-1]:-}
      start "$name" "$bin/lapse-node" --id "$i" --listen "tcp://127.0.0.1:${node_ports[i-1]}" \
        --coordinator "$coord_url" --data "$home/$name" \
        --etcd "$etcd_urls" --cluster-name "$cluster_name" \
        --metrics-listen "127.0.0.1:${metrics_ports[i-1]}" --cluster-token-file "$home/cluster-token" \
        --snapshot-nice 19 ${zone:+--zone "$zone"} ;;
    dynamodb)
      start "$name" "$bin/lapse-dynamodb" --listen "127.0.0.1:$dynamodb_port" \
        --coordinator "$coord_url" \
        ${LAPSE_DYNAMODB_CREDENTIALS:+--dynamodb-credentials "$LAPSE_DYNAMODB_CREDENTIALS"} ;;
  esac
}

# The URL of the coordinator that leads now (its election key with the
# lowest create revision), or nothing.
leader_url() {
  ETCDCTL_API=3 "$etcdctl_bin" --endpoints "$etcd_urls" --command-timeout=2s get --prefix \
    "/lapse/$cluster_name/coordinator/leader/" --sort-by=CREATE --order=ASCEND --limit 1 \
    --print-value-only 2>/dev/null | head -n 1
}

# $home/prometheus.yml: deploy/prometheus.yml scraping this cluster's nodes
# (the template's targets are make cluster's defaults, one per line).
write_prometheus_config() {
  {
    echo "# Written by deploy/local-cluster.sh from deploy/prometheus.yml: scrapes the nodes"
    echo "# of the cluster under $home (LAPSE_METRICS_PORT=$metrics_base)."
    awk -v p1="${metrics_ports[0]}" -v p2="${metrics_ports[1]}" -v p3="${metrics_ports[2]}" '
      { if (!sub(/\047127\.0\.0\.1:9401\047/, "\047127.0.0.1:" p1 "\047") &&
            !sub(/\047127\.0\.0\.1:9402\047/, "\047127.0.0.1:" p2 "\047"))
          sub(/\047127\.0\.0\.1:9403\047/, "\047127.0.0.1:" p3 "\047")
        print }' "$here/prometheus.yml"
  } >"$home/prometheus.yml.tmp"
  mv "$home/prometheus.yml.tmp" "$home/prometheus.yml"
}

# Starts what is not running (again, when it died) and waits until
# LAPSE_NODES nodes are UP.
start_all() {
  for b in lapse-coordinator lapse-node lapse lapse-dynamodb; do
    [[ -x $bin/$b ]] || { echo "local-cluster: $bin/$b not built (run make build)" >&2; exit 1; }
  done
  etcd_bin=$(command -v etcd || true)
  etcdctl_bin=$(command -v etcdctl || true)
  [[ -n $etcd_bin && -n $etcdctl_bin ]] ||
    { echo "local-cluster: etcd or etcdctl missing (run deploy/install-deps.sh)" >&2; exit 1; }
  mkdir -p "$home"
  # Refuse to start on ports someone else holds, rather than fail obscurely.
  local name port
  for name in "${names[@]}"; do
    live_pid "$home/$name.pid" >/dev/null && continue
    for port in $(ports_of "$name"); do
      if port_busy "$port"; then
        echo "local-cluster: port $port is in use by another process" >&2; exit 1
      fi
    done
  done
  # As a deployed cluster does (docs/operations.md), the nodes share a
  # cluster token for Replicate: made once, kept with the data.
  local token=$home/cluster-token
  if [[ ! -s $token ]]; then
    (umask 077 && head -c 32 /dev/urandom | base64 >"$token")
  fi
  for name in "${names[@]}"; do start_named "$name"; done

  echo -n "waiting for $nnodes nodes to register"
  local deadline=$((SECONDS + 30)) up=0
  local status rc
  while ((SECONDS < deadline)); do
    # timeout bounds a probe whose client hangs past its own 1 s limit (seen
    # once under ASan on a loaded machine: `up` waited 87 s on one probe);
    # such a probe is said on stderr and tried again.
    rc=0
    status=$(timeout 5 "$bin/lapse" --coordinator "$coord_url" --timeout-ms 1000 cluster-status \
      2>/dev/null) || rc=$?
    if ((rc == 124)); then
      echo >&2
      echo "local-cluster: a cluster-status probe did not end within 5 s (killed; trying again)" >&2
    fi
    up=$(grep -o '"State": *"UP"' <<<"$status" | wc -l || true)
    ((up >= nnodes)) && break
    echo -n .
    sleep 0.2
  done
  echo
  if ((up < nnodes)); then
    echo "local-cluster: only $up of $nnodes nodes registered within 30 s; logs in $home" >&2
    exit 1
  fi
  # The gateway connects once a coordinator answers; wait for its GET /.
  local deadline_gw=$((SECONDS + 15))
  # read -t bounds each probe: a gateway that accepts but never answers
  # must not hold `up` past its deadline.
  local status_line
  until (exec 3<>"/dev/tcp/127.0.0.1/$dynamodb_port" && printf 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&3 &&
    IFS= read -r -t 2 status_line <&3 && [[ $status_line == "HTTP/1."?" 200"* ]]) 2>/dev/null; do
    if ((SECONDS >= deadline_gw)); then
      echo "local-cluster: the DynamoDB gateway did not answer on 127.0.0.1:$dynamodb_port within 15 s; log $home/dynamodb.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  write_prometheus_config
}

ensure() {
  start_all >/dev/null
  echo "local cluster up: coordinators $coord_url, metrics on 127.0.0.1:${metrics_ports[0]}-${metrics_ports[2]}, DynamoDB API on http://127.0.0.1:$dynamodb_port"
}

up() {
  start_all
  timeout 15 "$bin/lapse" --coordinator "$coord_url" cluster-status # bounded as the probes above
  echo "leading coordinator: $(leader_url) (of $coord_url; etcd $etcd_urls)"
  echo "DynamoDB API: http://127.0.0.1:$dynamodb_port (aws dynamodb --endpoint-url http://127.0.0.1:$dynamodb_port ...)"
  local use_coord=""
  [[ $coord_port == 7400 ]] || use_coord="  export LAPSE_COORDINATOR=$coord_url
"
  cat <<TRY

Lapse is running (data and logs in $home). Try:
  export PATH=$bin:\$PATH
$use_coord  lapse create-table SessionData --partition-key UserName:S --sort-key SessionId:S
  lapse put SessionData '{"UserName":{"S":"user1"},"SessionId":{"S":"s1"},"ExpirationTime":{"N":"'\$((\$(date +%s)+5))'"}}'
  lapse get SessionData '{"UserName":{"S":"user1"},"SessionId":{"S":"s1"}}'
  lapse query SessionData --key '{"UserName":{"S":"user1"}}'
  lapse update-ttl SessionData --enable --attribute ExpirationTime
  lapse describe-ttl SessionData
  sleep 6; lapse scan SessionData      # the session expired and was deleted
  AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x aws dynamodb --region us-east-1 \\
    --endpoint-url http://127.0.0.1:$dynamodb_port list-tables   # DynamoDB's API (docs/dynamodb-api.md)
  curl -s http://127.0.0.1:${metrics_ports[0]}/metrics | grep lapse_ttl_deleted   # node 1's metrics
  prometheus --config.file=$home/prometheus.yml --storage.tsdb.path=$home/prometheus \
    --web.listen-address=127.0.0.1:9090   # scrapes all three nodes (docs/operations.md)
Stop it with: make cluster-down
TRY
}

down() {
  local stopped=0 i name pid tier
  # Nodes and the gateway first, then the coordinators, etcd last, so no
  # one logs another's disappearance. Nodes (and then coordinators) at once:
  # a node stopping after its peers may first wait out a replication round
  # (2 s) to one of them, and failovers to nodes that stop next are work for
  # nothing. etcd members one by one: one stopping while the others stop
  # waits seconds for a leadership transfer that cannot happen.
  for tier in 1 2 3; do
    for ((i = ${#all_names[@]} - 1; i >= 0; i--)); do
      name=${all_names[i]}
      case $name in
        node* | dynamodb) [[ $tier == 1 ]] || continue ;;
        coordinator*) [[ $tier == 2 ]] || continue ;;
        *) [[ $tier == 3 ]] || continue ;;
      esac
      if pid=$(live_pid "$home/$name.pid"); then
        if [[ $tier == 3 ]]; then
          proc_stop "$name" "$pid"
        else
          proc_stop "$name" "$pid" &
        fi
        stopped=$((stopped + 1))
      fi
      rm -f "$home/$name.pid" "$home/$name.cmd"
    done
    wait
  done
  ((stopped)) || echo "no local cluster running under $home"
}

status() {
  local name pid
  for name in "${all_names[@]}"; do
    [[ $name != node[4-9] || -f $home/$name.cmd ]] || continue
    if pid=$(live_pid "$home/$name.pid"); then echo "$name: running (pid $pid)"; else echo "$name: stopped"; fi
  done
}

case ${1:-} in
  up) up ;;
  ensure) ensure ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up [BIN_DIR] | ensure [BIN_DIR] | down | status" >&2; exit 2 ;;
esac
