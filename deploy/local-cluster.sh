#!/usr/bin/env bash
# A local three-node Lapse cluster on loopback, for trying Lapse out.
#
#   deploy/local-cluster.sh up [BIN_DIR]   start (or confirm running), wait for registration
#   deploy/local-cluster.sh down           stop exactly the processes `up` started
#   deploy/local-cluster.sh status         show which are running
#
# Coordinator tcp://127.0.0.1:7400, nodes 7401-7403, the nodes' Prometheus
# metrics on http://127.0.0.1:9401-9403/metrics (LAPSE_PORT and
# LAPSE_METRICS_PORT move them) (deploy/prometheus.yml
# scrapes them), the nodes' shared cluster token in $LAPSE_HOME/cluster-token.
# Data, logs and pid files
# live under $LAPSE_HOME (default .lapse in the current directory). Running
# `up` twice is harmless; `down` only signals processes whose pid file it
# wrote and whose command line still matches, never others.
set -euo pipefail

home=${LAPSE_HOME:-$PWD/.lapse}
here=$(cd "$(dirname "$0")" && pwd)
bin=${2:-$PWD/build/bin}
[[ -d $bin ]] && bin=$(cd "$bin" && pwd)
# LAPSE_PORT and LAPSE_METRICS_PORT move the ports (tests pick free ones):
# the coordinator on LAPSE_PORT and the nodes on the next three, the nodes'
# metrics on LAPSE_METRICS_PORT and the next two.
coord_port=${LAPSE_PORT:-7400}
metrics_port=${LAPSE_METRICS_PORT:-9401}
for p in "$coord_port" "$metrics_port"; do
  [[ $p =~ ^[0-9]+$ ]] && ((p >= 1 && p <= 65532)) ||
    { echo "local-cluster: bad port $p (LAPSE_PORT, LAPSE_METRICS_PORT)" >&2; exit 2; }
done
node_ports=($((coord_port + 1)) $((coord_port + 2)) $((coord_port + 3)))
metrics_ports=($metrics_port $((metrics_port + 1)) $((metrics_port + 2)))
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

up() {
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
  prometheus --config.file=$here/prometheus.yml --storage.tsdb.path=$home/prometheus \
    --web.listen-address=127.0.0.1:9090   # scrapes all three nodes (docs/operations.md)
Stop it with: make cluster-down
TRY
}

down() {
  local stopped=0
  for name in node1 node2 node3 coordinator; do
    local pidfile="$home/$name.pid" pid
    if pid=$(live_pid "$pidfile"); then
      kill -TERM "$pid"
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      if kill -0 "$pid" 2>/dev/null; then
        echo "$name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
        kill -KILL "$pid"
      fi
      echo "stopped $name (pid $pid)"
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
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up [BIN_DIR] | down | status" >&2; exit 2 ;;
esac
