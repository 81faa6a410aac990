#!/usr/bin/env bash
# A Lapse cluster spread over Linux network namespaces: one host per daemon
# group, joined by a bridge, all on this machine (docs/operations.md "A
# cluster in network namespaces"). Needs root, `ip` (iproute2), etcd and
# etcdctl.
#
#   deploy/netns-cluster.sh up [--bin-dir DIR] [--prefix P] [--subnet A.B.C.0/24] [--nodes N]
#   deploy/netns-cluster.sh down          stop the daemons, delete the namespaces
#   deploy/netns-cluster.sh status        namespaces, pids, etcd health, leader, cluster-status
#   deploy/netns-cluster.sh lapse ARGS    the CLI, run in the coordinator's namespace
#   deploy/netns-cluster.sh partition N | heal N
#                                         link of host N down / up (inside its namespace)
#   deploy/netns-cluster.sh cut-oneway N M | heal-oneway N
#                                         drop / stop dropping what host N sends host M
#   deploy/netns-cluster.sh net-up [--prefix P] [--subnet S] [--nodes N] | net-down
#                                         the network alone, no daemons (the chaos harness)
#
# Layout (prefix "lapse", subnet 10.77.0.0/24, three node hosts: the
# defaults), the control plane on etcd as on three real hosts:
#
#   namespace   interface  address         runs
#   lapse-br    br0        (none)          the bridge; ports c, c2, n1, n2, n3
#   lapse-c     eth0       10.77.0.10/24   lapse-coordinator  tcp://10.77.0.10:7400
#   lapse-c2    eth0       10.77.0.20/24   lapse-coordinator  tcp://10.77.0.20:7400
#   lapse-n1    eth0       10.77.0.11/24   lapse-node --id 1  tcp://10.77.0.11:7401, metrics :9401
#                                          etcd member e1     http://10.77.0.11:2379, peers :2380
#   lapse-n2    eth0       10.77.0.12/24   node 2, etcd member e2 (likewise)
#   lapse-n3    eth0       10.77.0.13/24   node 3, etcd member e3 (likewise)
#
# --nodes N (or $LAPSE_NETNS_NODES; 3 to 9, default 3) makes N node hosts,
# lapse-nI on 10.77.0.(10+I) with node I; the etcd members stay three, on
# hosts 1 to 3 (a quorum that outlives one host, as docs/operations.md
# advises), so a host past the third runs a node alone. The chaos harness
# asks for four when its move fault drains one node of tables of three
# copies. The number is recorded with the network: `down` and the other
# commands of a running cluster take it from there.
#
# Both coordinators and the nodes run with --etcd (the three members) and
# --cluster-name P; one coordinator leads, the other forwards to it. Cutting
# host N's link (partition N) cuts node N and etcd member N, as on a real
# host.
#
# Nothing is added to the root namespace: every veth is created inside our
# namespaces, and the host has no address in the subnet (so etcd's 2379/2380
# inside the namespaces never meet Debian's default etcd). Clients run inside
# the coordinator's namespace (`ip netns exec lapse-c ...`, which is what the
# `lapse` subcommand does). Before creating anything, `up` refuses a subnet
# that overlaps an address or a route of the root namespace; before any
# daemon starts, it checks that every address it will use sits on an
# interface it created.
#
# State lives under $LAPSE_HOME (default .lapse-netns in the current
# directory): netns.state records each namespace as it is created, so `down`
# deletes exactly those (and is a no-op the second time); data dirs, logs,
# pid files and the command line of each daemon (NAME.cmd) sit beside it.
# `down` keeps data and logs, like local-cluster.sh.
set -euo pipefail
# shellcheck source=deploy/proc.sh
source "$(dirname "${BASH_SOURCE[0]}")/proc.sh"

home=${LAPSE_HOME:-$PWD/.lapse-netns}
state=$home/netns.state
me=netns-cluster

die() {
  echo "$me: $*" >&2
  exit 1
}

usage() {
  sed -n '7,16p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# ------------------------------------------------------------------ settings
# Defaults, then the state file of a cluster that is up, then flags.
prefix=${LAPSE_NETNS_PREFIX:-lapse}
subnet=${LAPSE_NETNS_SUBNET:-10.77.0.0/24}
nodes=${LAPSE_NETNS_NODES:-3}
bin=$PWD/build/bin
recorded_ns=()

read_state() {
  recorded_ns=()
  [[ -f $state ]] || return 0
  # A state file from before --nodes records no count: its network has three.
  nodes=3
  local k v
  while IFS='=' read -r k v; do
    case $k in
      prefix) prefix=$v ;;
      subnet) subnet=$v ;;
      nodes) nodes=$v ;;
      bin) bin=$v ;;
      ns) recorded_ns+=("$v") ;;
    esac
  done <"$state"
}

cmd=${1:-}
[[ -n $cmd ]] || usage
shift
read_state
flag_prefix='' flag_subnet='' flag_bin='' flag_nodes=''
args=()
while (($#)); do
  case $1 in
    --prefix) flag_prefix=${2:?--prefix needs a value}; shift 2 ;;
    --subnet) flag_subnet=${2:?--subnet needs a value}; shift 2 ;;
    --bin-dir) flag_bin=${2:?--bin-dir needs a value}; shift 2 ;;
    --nodes) flag_nodes=${2:?--nodes needs a value}; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if [[ -f $state ]]; then
  # A running cluster's names win; a different --prefix or --subnet is an error.
  [[ -z $flag_prefix || $flag_prefix == "$prefix" ]] ||
    die "$home already holds cluster '$prefix'; run down first or use another LAPSE_HOME"
  [[ -z $flag_subnet || $flag_subnet == "$subnet" ]] ||
    die "$home already holds a cluster on $subnet; run down first or use another LAPSE_HOME"
  [[ -z $flag_nodes || $flag_nodes == "$nodes" ]] ||
    die "$home already holds a cluster of $nodes node hosts; run down first or use another LAPSE_HOME"
else
  prefix=${flag_prefix:-$prefix}
  subnet=${flag_subnet:-$subnet}
  nodes=${flag_nodes:-$nodes}
fi
[[ -n $flag_bin ]] && bin=$flag_bin
[[ -d $bin ]] && bin=$(cd "$bin" && pwd)

# Namespace names are file names under /run/netns and show in `ip netns list`.
[[ $prefix =~ ^[A-Za-z][A-Za-z0-9_.-]{0,39}$ ]] || die "bad prefix '$prefix' (letters, digits, _.-; at most 40)"
[[ $subnet =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.0/24$ ]] ||
  die "subnet must be A.B.C.0/24, not '$subnet'"
for octet in "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}"; do
  ((octet <= 255)) || die "bad subnet '$subnet'"
done
base=${subnet%.0/24}
# At least three: the etcd members' hosts. At most nine: node I is .(10+I),
# and .20 is the second coordinator's.
[[ $nodes =~ ^[3-9]$ ]] || die "--nodes must be 3 to 9, not '$nodes'"

ns_br=$prefix-br
ns_c=$prefix-c
ns_c2=$prefix-c2
ns_nodes=()
for ((i = 1; i <= nodes; i++)); do ns_nodes+=("$prefix-n$i"); done
coord_addr=$base.10
coord2_addr=$base.20
coord_urls=tcp://$coord_addr:7400,tcp://$coord2_addr:7400
node_addr() { echo "$base.$((10 + $1))"; }
# One etcd member on each of the first three node hosts: client URL .1N:2379,
# peer URL .1N:2380. Three whatever --nodes says: a quorum that outlives one
# host, and the same members (data dirs etcd1..3) under any node count.
etcd_urls=http://$base.11:2379,http://$base.12:2379,http://$base.13:2379
etcd_initial=e1=http://$base.11:2380,e2=http://$base.12:2380,e3=http://$base.13:2380
# The coordinators' election and the nodes' leases live under /lapse/P/.
cluster_name=$prefix
# Every daemon, in the order `up` starts them; `down` stops them in reverse.
daemons=(etcd1 etcd2 etcd3 coordinator coordinator2)
for ((i = 1; i <= nodes; i++)); do daemons+=("node$i"); done
# The bridge's ports, as `ip link` lists them sorted: one per host.
bridge_ports="c c2 "
for ((i = 1; i <= nodes; i++)); do bridge_ports+="n$i "; done

# ------------------------------------------------------------------ helpers
need_root() {
  [[ $(id -u) -eq 0 ]] || die "needs root (network namespaces); run it with sudo"
  command -v ip >/dev/null 2>&1 || die "needs ip (iproute2)"
  ip netns list >/dev/null 2>&1 || die "'ip netns' does not work here"
}

ns_exists() {
  [[ -e /run/netns/$1 ]]
}

ip2int() {
  local a b c d
  IFS=. read -r a b c d <<<"$1"
  echo $(((a << 24) | (b << 16) | (c << 8) | d))
}

# True when A/LA and B/LB share an address.
overlaps() {
  local a b l mask
  a=$(ip2int "$1") b=$(ip2int "$3")
  l=$(($2 < $4 ? $2 : $4))
  mask=$(((0xffffffff << (32 - l)) & 0xffffffff))
  (((a & mask) == (b & mask)))
}

# Refuses a subnet that an address or a route of the root namespace already
# uses (the default route excepted: it covers everything). Prints the culprit.
check_subnet_free() {
  local line cidr net len
  while read -r line; do
    cidr=$(awk '{print $4}' <<<"$line")
    net=${cidr%/*} len=${cidr#*/}
    if overlaps "$net" "$len" "$base.0" 24; then
      die "subnet $subnet overlaps address $cidr of $(awk '{print $2}' <<<"$line") in the root namespace (pick another with --subnet)"
    fi
  done < <(ip -4 -o addr show)
  while read -r line; do
    # shellcheck disable=SC2086 # split the route into its words
    set -- $line
    case ${1:-} in
      local | broadcast | unicast | multicast | anycast | unreachable | blackhole | prohibit | throw | nat) shift ;;
    esac
    cidr=${1:-default}
    [[ $cidr == default ]] && continue
    [[ $cidr == */* ]] || cidr=$cidr/32
    net=${cidr%/*} len=${cidr#*/}
    ((len > 0)) || continue
    if overlaps "$net" "$len" "$base.0" 24; then
      die "subnet $subnet overlaps route '$line' in the root namespace (pick another with --subnet)"
    fi
  done < <(ip -4 route show table all)
}

record() {
  echo "$1" >>"$state"
}

# Writes 1 to a sysctl inside namespace $1 (quietly: IPv6 may be absent).
ns_sysctl() {
  ip netns exec "$1" sh -c "echo $3 > /proc/sys/$2" 2>/dev/null || true
}

# Every address we are about to use must sit on the interface we made for it:
# the veth eth0 inside our namespace, its peer a port of our bridge, and the
# same address must be nowhere in the root namespace.
verify_addresses() {
  local ns addr i p ports
  local -a pairs=("$ns_c=$coord_addr" "$ns_c2=$coord2_addr")
  for ((i = 1; i <= nodes; i++)); do pairs+=("${ns_nodes[i - 1]}=$(node_addr "$i")"); done
  ns_exists "$ns_br" || { echo "$me: namespace $ns_br is missing" >&2; return 1; }
  ports=$(ip -n "$ns_br" -o link show master br0 | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ')
  if [[ $ports != "$bridge_ports" ]]; then
    echo "$me: bridge $ns_br/br0 has ports '$ports', want '${bridge_ports% }'" >&2
    return 1
  fi
  for p in "${pairs[@]}"; do
    ns=${p%%=*} addr=${p#*=}
    if ! ns_exists "$ns"; then
      echo "$me: namespace $ns is missing" >&2
      return 1
    fi
    if ! ip -n "$ns" -d -o link show dev eth0 2>/dev/null | grep -q ' veth '; then
      echo "$me: $ns has no veth eth0" >&2
      return 1
    fi
    if [[ $(ip -n "$ns" -4 -o addr show dev eth0 | awk '{print $4}') != "$addr/24" ]]; then
      echo "$me: $ns/eth0 does not hold exactly $addr/24" >&2
      return 1
    fi
    if ip -4 -o addr show | awk '{print $4}' | grep -qx "$addr/[0-9]*"; then
      echo "$me: $addr is also an address of the root namespace; refusing to use it" >&2
      return 1
    fi
  done
}

# ------------------------------------------------------------------ the network
net_complete() {
  local ns
  for ns in "$ns_br" "$ns_c" "$ns_c2" "${ns_nodes[@]}"; do ns_exists "$ns" || return 1; done
  [[ -f $state ]]
}

net_up() {
  need_root
  if [[ -f $state ]]; then
    net_complete || die "$home records a half-made network; run down first"
    verify_addresses || die "the recorded network is not as made; run down first"
    return 0
  fi
  local ns
  for ns in "$ns_br" "$ns_c" "$ns_c2" "${ns_nodes[@]}"; do
    ns_exists "$ns" && die "namespace $ns already exists and is not ours (no $state); refusing"
  done
  check_subnet_free
  mkdir -p "$home"
  printf 'prefix=%s\nsubnet=%s\nnodes=%s\nbin=%s\n' "$prefix" "$subnet" "$nodes" "$bin" >"$state"
  # From here on a failure undoes what was made.
  trap 'echo "$me: setting up the network failed; removing what was made" >&2; net_down >/dev/null' ERR
  for ns in "$ns_br" "$ns_c" "$ns_c2" "${ns_nodes[@]}"; do
    ip netns add "$ns"
    record "ns=$ns"
    # No IPv6 (link-local addresses, router solicitations) on our links.
    ns_sysctl "$ns" net/ipv6/conf/default/disable_ipv6 1
    ns_sysctl "$ns" net/ipv6/conf/all/disable_ipv6 1
    ip -n "$ns" link set dev lo up
  done
  ip -n "$ns_br" link add br0 type bridge forward_delay 0 stp_state 0
  ip -n "$ns_br" link set dev br0 up
  local -a pairs=("c=$ns_c=$coord_addr" "c2=$ns_c2=$coord2_addr")
  local i
  for ((i = 1; i <= nodes; i++)); do pairs+=("n$i=${ns_nodes[i - 1]}=$(node_addr "$i")"); done
  local p port addr
  for p in "${pairs[@]}"; do
    IFS='=' read -r port ns addr <<<"$p"
    ip -n "$ns_br" link add "$port" type veth peer name eth0 netns "$ns"
    ip -n "$ns_br" link set dev "$port" master br0
    ip -n "$ns_br" link set dev "$port" up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set dev eth0 up
  done
  trap - ERR
  if ! verify_addresses; then
    net_down >/dev/null
    die "the network is not as intended; removed it"
  fi
  echo "$me: network up: bridge in $ns_br, subnet $subnet, $nodes node hosts"
}

net_down() {
  local ns pids
  if ((${#recorded_ns[@]} == 0)); then
    read_state
  fi
  for ns in "${recorded_ns[@]}"; do
    ns_exists "$ns" || continue
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ' || true)
    if [[ -n ${pids// /} ]]; then
      echo "$me: processes still in $ns (not started by this script, left alone): $pids" >&2
    fi
    ip netns del "$ns"
    echo "$me: deleted namespace $ns"
  done
  rm -f "$state"
  recorded_ns=()
}

# ------------------------------------------------------------------ daemons
# The namespace daemon $1 (etcdN, coordinator, coordinator2, nodeN) runs in.
ns_of() {
  case $1 in
    coordinator) echo "$ns_c" ;;
    coordinator2) echo "$ns_c2" ;;
    etcd[123]) echo "${ns_nodes[${1#etcd} - 1]}" ;;
    node[1-9]) (("${1#node}" <= nodes)) || die "no daemon named '$1' ($nodes node hosts)"
      echo "${ns_nodes[${1#node} - 1]}" ;;
    *) die "no daemon named '$1'" ;;
  esac
}

# Prints the pid of daemon $1 when that process is alive, is ours (its
# command line is the one `start` recorded in NAME.cmd) and lives in its
# namespace (or in one whose name someone deleted by hand).
live_pid() {
  local name=$1 pidfile=$home/$1.pid cmdfile=$home/$1.cmd pid in_ns
  [[ -f $pidfile && -f $cmdfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  proc_running "$pid" || return 1
  [[ $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) == "$(<"$cmdfile") " ]] || return 1
  in_ns=$(ip netns identify "$pid" 2>/dev/null || true)
  [[ $in_ns == "$(ns_of "$name")" || -z $in_ns ]] || return 1
  echo "$pid"
}

start() {
  local name=$1 ns
  shift
  ns=$(ns_of "$name")
  local pidfile=$home/$name.pid log=$home/$name.log
  if live_pid "$name" >/dev/null; then
    echo "$name already running (pid $(<"$pidfile")) in $ns"
    return 0
  fi
  # ip netns exec and setsid both exec: $! is the daemon's pid.
  ip netns exec "$ns" setsid "$@" >>"$log" 2>&1 </dev/null &
  echo $! >"$pidfile"
  echo "$*" >"$home/$name.cmd"
  echo "started $name (pid $!) in $ns, log $log"
}

start_named() {
  local name=$1 i addr
  case $name in
    etcd*)
      i=${name#etcd} addr=$(node_addr "${name#etcd}")
      start "$name" "$etcd_bin" --name "e$i" --data-dir "$home/$name" \
        --listen-client-urls "http://$addr:2379" --advertise-client-urls "http://$addr:2379" \
        --listen-peer-urls "http://$addr:2380" --initial-advertise-peer-urls "http://$addr:2380" \
        --initial-cluster "$etcd_initial" --initial-cluster-token "lapse-netns-$prefix" \
        --initial-cluster-state new --heartbeat-interval 50 --election-timeout 500 --pre-vote \
        --logger zap --log-level warn ;;
    coordinator | coordinator2)
      [[ $name == coordinator ]] && addr=$coord_addr || addr=$coord2_addr
      start "$name" "$bin/lapse-coordinator" --listen "tcp://$addr:7400" --etcd "$etcd_urls" \
        --cluster-name "$cluster_name" ;;
    node*)
      i=${name#node} addr=$(node_addr "${name#node}")
      start "$name" "$bin/lapse-node" --id "$i" --listen "tcp://$addr:7401" \
        --coordinator "$coord_urls" --data "$home/$name" --etcd "$etcd_urls" \
        --cluster-name "$cluster_name" --metrics-listen "$addr:9401" \
        --cluster-token-file "$home/cluster-token" ;;
  esac
}

lapse_cli() {
  ip netns exec "$ns_c" "$bin/lapse" --coordinator "$coord_urls" "$@"
}

# etcdctl (v3 API) run in the coordinator's namespace, which reaches every
# member; the endpoints are the first argument.
etcdctl_in() {
  local endpoints=$1
  shift
  ip netns exec "$ns_c" env ETCDCTL_API=3 "${etcdctl_bin:-etcdctl}" --endpoints "$endpoints" \
    --dial-timeout=1s --command-timeout=2s "$@"
}

# The URL of the coordinator that leads now: its election key has the lowest
# create revision (etcd's election API). Prints nothing when none leads.
leader_url() {
  etcdctl_in "$etcd_urls" get --prefix "/lapse/$cluster_name/coordinator/leader/" \
    --sort-by=CREATE --order=ASCEND --limit 1 --print-value-only 2>/dev/null | head -n 1
}

# The number of etcd members answering `endpoint health` (a write through
# the raft leader, so only members in a cluster with quorum count).
etcd_healthy() {
  etcdctl_in "$etcd_urls" endpoint health 2>&1 | grep -c ' is healthy' || true
}

# The etcd data dirs remember the members' peer URLs and the catalog lives
# under /lapse/PREFIX/: refuse to start them under another subnet or prefix.
check_etcd_data() {
  local mark=$home/etcd.cluster want="subnet=$subnet prefix=$prefix"
  [[ ! -f $mark || $(<"$mark") == "$want" ]] ||
    die "the etcd data in $home was made for '$(<"$mark")', not '$want'; use those, or remove $home/etcd1..3 and $home/etcd.cluster (the catalog is lost)"
  [[ ${1:-} != record ]] || echo "$want" >"$mark"
}

stop_daemons() {
  local i name pid
  # Nodes first, etcd last, so no one logs another's disappearance.
  for ((i = ${#daemons[@]} - 1; i >= 0; i--)); do
    name=${daemons[i]}
    if pid=$(live_pid "$name"); then
      proc_stop "$name" "$pid"
    fi
    rm -f "$home/$name.pid" "$home/$name.cmd"
  done
  return 0
}

up() {
  need_root
  local b
  for b in lapse-coordinator lapse-node lapse; do
    [[ -x $bin/$b ]] || die "$bin/$b not built (make build, or --bin-dir DIR)"
  done
  etcd_bin=$(command -v etcd || true)
  etcdctl_bin=$(command -v etcdctl || true)
  [[ -n $etcd_bin && -n $etcdctl_bin ]] || die "etcd or etcdctl missing (run deploy/install-deps.sh)"
  check_etcd_data
  net_up
  check_etcd_data record
  # As on separate hosts, the nodes share a cluster token (docs/operations.md):
  # made once, kept with the data.
  local token=$home/cluster-token
  if [[ ! -s $token ]]; then
    (umask 077 && head -c 32 /dev/urandom | base64 >"$token")
  fi
  local name
  for name in etcd1 etcd2 etcd3; do start_named "$name"; done
  echo -n "waiting for three healthy etcd members"
  local deadline=$((SECONDS + 30)) n=0
  while ((SECONDS < deadline)); do
    n=$(etcd_healthy)
    ((n >= 3)) && break
    echo -n .
    sleep 0.2
  done
  echo
  ((n >= 3)) || die "only $n of 3 etcd members healthy within 30 s; logs in $home (run down to clean up)"
  for name in "${daemons[@]:3}"; do start_named "$name"; done
  echo -n "waiting for $nodes nodes to register"
  deadline=$((SECONDS + 30)) n=0
  while ((SECONDS < deadline)); do
    n=$(lapse_cli --timeout-ms 1000 cluster-status 2>/dev/null | grep -o '"State": *"UP"' | wc -l || true)
    ((n >= nodes)) && break
    echo -n .
    sleep 0.2
  done
  echo
  if ((n < nodes)); then
    echo "$me: only $n of $nodes nodes registered within 30 s; logs in $home (run down to clean up)" >&2
    exit 1
  fi
  status
  cat <<TRY

Lapse runs in network namespaces (state, data and logs in $home). The host has
no address in $subnet: run clients inside the coordinator's namespace.
  $0 lapse create-table SessionData --partition-key UserName:S
  $0 lapse put SessionData '{"UserName":{"S":"u1"},"ExpirationTime":{"N":"'\$((\$(date +%s)+5))'"}}'
  ip netns exec $ns_c curl -s http://$(node_addr 1):9401/metrics
  ip netns exec $ns_c env ETCDCTL_API=3 etcdctl --endpoints $etcd_urls endpoint health
  $0 partition 2; sleep 5; $0 heal 2     # cut host 2 (node 2, etcd member e2) off for 5 s
Stop it with: $0 down   (or make netns-down)
TRY
}

down() {
  need_root
  if [[ ! -f $state ]]; then
    echo "$me: nothing to remove: no cluster recorded under $home"
    local left
    left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$prefix-(br|c|c2|n[0-9])\$" | tr '\n' ' ' || true)
    [[ -z $left ]] || echo "$me: namespaces $left exist but are not recorded here (another LAPSE_HOME?)"
    return 0
  fi
  stop_daemons
  net_down
}

status() {
  need_root
  if [[ ! -f $state ]]; then
    echo "$me: no cluster recorded under $home"
    return 0
  fi
  read_state
  echo "cluster '$prefix' on $subnet, state in $home"
  local ns name pid
  for ns in "${recorded_ns[@]}"; do
    if ns_exists "$ns"; then
      echo "namespace $ns:"
      ip -n "$ns" -4 -br addr show | sed 's/^/  /'
    else
      echo "namespace $ns: missing"
    fi
  done
  for name in "${daemons[@]}"; do
    if pid=$(live_pid "$name"); then
      echo "$name: running (pid $pid) in $(ns_of "$name")"
    else
      echo "$name: stopped"
    fi
  done
  ns_exists "$ns_c" || return 0
  if etcdctl_bin=$(command -v etcdctl); then
    echo "etcd members ($etcd_urls):"
    etcdctl_in "$etcd_urls" endpoint health 2>&1 | sed 's/^/  /' || true
    local leader
    leader=$(leader_url)
    echo "leading coordinator: ${leader:-none} (of $coord_urls)"
  fi
  if [[ -x $bin/lapse ]]; then
    lapse_cli --timeout-ms 2000 cluster-status || true
  fi
}

# True when $1 names a node host of this network (1 to $nodes).
is_host() {
  [[ ${1:-} =~ ^[1-9]$ ]] && (($1 <= nodes))
}

# Link of host $1 (node N and, on hosts 1 to 3, etcd member eN) down or up
# ($2), inside its namespace.
set_link() {
  need_root
  [[ -f $state ]] || die "no cluster recorded under $home"
  is_host "${1:-}" || die "usage: $0 partition|heal N (N = 1 to $nodes)"
  local ns=${ns_nodes[$1 - 1]} member=''
  ns_exists "$ns" || die "namespace $ns is missing"
  ip -n "$ns" link set dev eth0 "$2"
  (($1 <= 3)) && member=", etcd member e$1"
  echo "$me: host $1 ($ns/eth0: node $1$member) link $2"
}

# One-way cut: host $1 drops every packet it sends to host $2's address,
# while host $2 still reaches host $1. Egress classes on its eth0, inside
# its namespace, built from what every kernel has (no tc action modules):
# an htb root whose default class passes everything, and a class for host
# $2's address whose queue holds nothing (pfifo limit 0: each packet is
# dropped as it is queued). heal-oneway removes them.
cut_oneway() {
  need_root
  [[ -f $state ]] || die "no cluster recorded under $home"
  if ! is_host "${1:-}" || ! is_host "${2:-}" || [[ $1 == "$2" ]]; then
    die "usage: $0 cut-oneway N M (N, M = 1 to $nodes; N != M)"
  fi
  local ns=${ns_nodes[$1 - 1]}
  ns_exists "$ns" || die "namespace $ns is missing"
  local tc=(ip netns exec "$ns" tc)
  "${tc[@]}" qdisc del dev eth0 root 2>/dev/null || true
  "${tc[@]}" qdisc add dev eth0 root handle 1: htb default 20
  "${tc[@]}" class add dev eth0 parent 1: classid 1:20 htb rate 10gbit quantum 60000
  "${tc[@]}" class add dev eth0 parent 1: classid 1:10 htb rate 10gbit quantum 60000
  "${tc[@]}" qdisc add dev eth0 parent 1:10 handle 10: pfifo limit 0
  "${tc[@]}" filter add dev eth0 parent 1: protocol ip prio 1 u32 \
    match ip dst "$(node_addr "$2")/32" flowid 1:10
  echo "$me: host $1 ($ns/eth0) drops what it sends host $2 ($(node_addr "$2"))"
}

heal_oneway() {
  need_root
  [[ -f $state ]] || die "no cluster recorded under $home"
  is_host "${1:-}" || die "usage: $0 heal-oneway N (N = 1 to $nodes)"
  local ns=${ns_nodes[$1 - 1]}
  ns_exists "$ns" || die "namespace $ns is missing"
  ip netns exec "$ns" tc qdisc del dev eth0 root 2>/dev/null || true
  echo "$me: host $1 ($ns/eth0) sends everywhere again"
}

case $cmd in
  up) up ;;
  down) down ;;
  status) status ;;
  net-up) net_up ;;
  net-down) need_root; net_down ;;
  partition) set_link "${args[0]:-}" down ;;
  heal) set_link "${args[0]:-}" up ;;
  cut-oneway) cut_oneway "${args[0]:-}" "${args[1]:-}" ;;
  heal-oneway) heal_oneway "${args[0]:-}" ;;
  lapse)
    need_root
    [[ -f $state ]] || die "no cluster recorded under $home"
    lapse_cli "${args[@]}"
    ;;
  *) usage ;;
esac
