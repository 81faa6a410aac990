#!/usr/bin/env bash
# A local three-node Lapse cluster on loopback, for trying Lapse out.
#
#   deploy/local-cluster.sh up [BIN_DIR]     start (or confirm running), wait for registration,
#                                            print the status and commands to try
#   deploy/local-cluster.sh ensure [BIN_DIR] the same, printing one line (make demo)
#   deploy/local-cluster.sh down             stop exactly the processes `up` started
#   deploy/local-cluster.sh status           show which are running
#
# Ports, both moved by a base (tests pick free ones), node i at base + i:
#   LAPSE_PORT=N (default 7400)          the coordinator on tcp://127.0.0.1:N, node i on N+i
#   LAPSE_METRICS_PORT=M (default 9400)  node i's Prometheus metrics on
#                                        http://127.0.0.1:(M+i)/metrics
# `up` writes $LAPSE_HOME/prometheus.yml, deploy/prometheus.yml with the
# targets of the ports in use. The nodes' shared cluster token is in
# $LAPSE_HOME/cluster-token. Data, logs and pid files live under $LAPSE_HOME
# (default .lapse in the current directory). Running `up` twice is
# harmless; `down` only signals processes whose pid file it wrote and whose
# command line still matches, never others.
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
node_ports=($((coord_port + 1)) $((coord_port + 2)) $((coord_port + 3)))
metrics_ports=($((metrics_base + 1)) $((metrics_base + 2)) $((metrics_base + 3)))
coord_url="tcp://127.0.0.1:$coord_port"

# Prints the pid in $1's pid file when that process is alive and is ours.
live_pid() {
  local pidfile=$1 pid
  [[ -f $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "--data $home/" || return 1
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
  echo "started $name (pid $!), log $log"
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

# Starts what is not running and waits until three nodes are UP.
start_all() {
  for b in lapse-coordinator lapse-node lapse; do
    [[ -x $bin/$b ]] || { echo "local-cluster: $bin/$b not built (run make build)" >&2; exit 1; }
  done
  mkdir -p "$home"
  local all_running=1
  live_pid "$home/coordinator.pid" >/dev/null || all_running=0
  for i in 1 2 3; do live_pid "$home/node$i.pid" >/dev/null || all_running=0; done
  if ((!all_running)); then
    # Refuse to start on ports someone else holds, rather than fail obscurely.
    if ! live_pid "$home/coordinator.pid" >/dev/null && port_busy $coord_port; then
      echo "local-cluster: port $coord_port is in use by another process" >&2; exit 1
    fi
    for i in 1 2 3; do
      if ! live_pid "$home/node$i.pid" >/dev/null; then
        for port in "${node_ports[i-1]}" "${metrics_ports[i-1]}"; do
          if port_busy "$port"; then
            echo "local-cluster: port $port is in use by another process" >&2; exit 1
          fi
        done
      fi
    done
  fi
  # As a deployed cluster does (docs/operations.md), the nodes share a
  # cluster token for Replicate: made once, kept with the data.
  local token=$home/cluster-token
  if [[ ! -s $token ]]; then
    (umask 077 && head -c 32 /dev/urandom | base64 >"$token")
  fi
  start coordinator "$bin/lapse-coordinator" --listen "$coord_url" --data "$home/coordinator"
  for i in 1 2 3; do
    start "node$i" "$bin/lapse-node" --id "$i" --listen "tcp://127.0.0.1:${node_ports[i-1]}" \
      --coordinator "$coord_url" --data "$home/node$i" \
      --metrics-listen "127.0.0.1:${metrics_ports[i-1]}" --cluster-token-file "$token"
  done

  echo -n "waiting for three nodes to register"
  local deadline=$((SECONDS + 30)) up=0
  while ((SECONDS < deadline)); do
    up=$("$bin/lapse" --coordinator "$coord_url" --timeout-ms 1000 cluster-status 2>/dev/null |
      grep -o '"State": *"UP"' | wc -l || true)
    ((up >= 3)) && break
    echo -n .
    sleep 0.2
  done
  echo
  if ((up < 3)); then
    echo "local-cluster: only $up of 3 nodes registered within 30 s; logs in $home" >&2
    exit 1
  fi
  write_prometheus_config
}

ensure() {
  start_all >/dev/null
  echo "local cluster up: coordinator $coord_url, metrics on 127.0.0.1:${metrics_ports[0]}-${metrics_ports[2]}"
}

up() {
  start_all
  "$bin/lapse" --coordinator "$coord_url" cluster-status
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
  curl -s http://127.0.0.1:${metrics_ports[0]}/metrics | grep lapse_ttl_deleted   # node 1's metrics
  prometheus --config.file=$home/prometheus.yml --storage.tsdb.path=$home/prometheus \
    --web.listen-address=127.0.0.1:9090   # scrapes all three nodes (docs/operations.md)
Stop it with: make cluster-down
TRY
}

down() {
  local stopped=0
  for name in node1 node2 node3 coordinator; do
    local pidfile="$home/$name.pid" pid
    if pid=$(live_pid "$pidfile"); then
      proc_stop "$name" "$pid"
      stopped=$((stopped + 1))
    fi
    rm -f "$pidfile"
  done
  ((stopped)) || echo "no local cluster running under $home"
}

status() {
  for name in coordinator node1 node2 node3; do
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
