#!/usr/bin/env bash
# netns-daemon.sh: lapse-chaos's stand-in for lapse-coordinator, lapse-node
# and etcd in its network-namespace mode (docs/chaos.md "partition").
#
# lapse-chaos links this file under the three names into a directory it
# gives tests/cluster.c as the bin dir (and tests/etcd_members.c as
# $LAPSE_ETCD). cluster.c starts daemons on 127.0.0.1 ports; this script
# moves each into its namespace of the network made by
# deploy/netns-cluster.sh net-up and rewrites the addresses to match:
#
#   lapse-coordinator   namespace P-c    --listen tcp://0.0.0.0:PORT (all of
#                                        P-c: its loopback, where lapse-chaos
#                                        itself runs, and BASE.10 for nodes)
#   lapse-node --id N   namespace P-nN   --listen tcp://BASE.(10+N):PORT,
#                                        --coordinator tcp://BASE.10:PORT,...
#                                        --metrics-listen BASE.(10+N):PORT
#   etcd --name mI      namespace P-n(I+1), beside node I+1: a host's member
#   (I = 0, 1, 2)                        (etcd_members.c already gives it the
#                                        address BASE.(11+I), from
#                                        $LAPSE_ETCD_HOSTS; nothing to rewrite)
#
# N runs from 1 to $LAPSE_CHAOS_NETNS_NODES, the node hosts net-up made (3,
# or 4 for the move fault); the etcd members are three, on hosts 1 to 3,
# whatever the node count.
#
# Ports are kept. `ip netns exec` and this script both exec, so the daemon
# keeps the pid its starter spawned: kill -9, SIGSTOP and reaping work as on
# loopback. Set by lapse-chaos: LAPSE_CHAOS_NETNS_PREFIX (P),
# LAPSE_CHAOS_NETNS_BASE (BASE, e.g. 10.77.0), LAPSE_CHAOS_REAL_BIN_DIR,
# LAPSE_CHAOS_REAL_ETCD (the etcd binary), LAPSE_CHAOS_NETNS_NODES.
set -eu

prefix=${LAPSE_CHAOS_NETNS_PREFIX:?not set: run by lapse-chaos only}
base=${LAPSE_CHAOS_NETNS_BASE:?not set: run by lapse-chaos only}
real=${LAPSE_CHAOS_REAL_BIN_DIR:?not set: run by lapse-chaos only}
nodes=${LAPSE_CHAOS_NETNS_NODES:?not set: run by lapse-chaos only}
name=${0##*/}

id=
member=
prev=
for a in "$@"; do
  [[ $prev == --id ]] && id=$a
  [[ $prev == --name ]] && member=$a
  prev=$a
done

case $name in
  lapse-coordinator) ns=$prefix-c ;;
  lapse-node)
    if ! [[ $id =~ ^[1-9]$ ]] || ((id > nodes)); then
      echo "netns-daemon: node id '$id' is not 1 to $nodes (the node hosts)" >&2
      exit 2
    fi
    ns=$prefix-n$id
    ;;
  etcd)
    [[ $member =~ ^m[012]$ ]] || { echo "netns-daemon: etcd member '$member' is not m0, m1 or m2" >&2; exit 2; }
    ns=$prefix-n$((${member#m} + 1))
    exec ip netns exec "$ns" "${LAPSE_CHAOS_REAL_ETCD:?not set: run by lapse-chaos only}" "$@"
    ;;
  *) echo "netns-daemon: run as lapse-coordinator, lapse-node or etcd, not $name" >&2; exit 2 ;;
esac

# tcp://127.0.0.1:PORT or 127.0.0.1:PORT, with the host replaced by $2;
# each URL of a comma-separated list.
rehost() {
  local out='' u
  local -a urls
  IFS=, read -r -a urls <<<"$1"
  for u in "${urls[@]}"; do
    case $u in
      tcp://127.0.0.1:*) u="tcp://$2:${u#tcp://127.0.0.1:}" ;;
      127.0.0.1:*) u="$2:${u#127.0.0.1:}" ;;
    esac
    out+=${out:+,}$u
  done
  echo "$out"
}

args=()
prev=
for a in "$@"; do
  flag=$prev
  prev=$a
  case $name:$flag in
    lapse-coordinator:--listen) a=$(rehost "$a" 0.0.0.0) ;;
    lapse-node:--listen | lapse-node:--metrics-listen) a=$(rehost "$a" "$base.$((10 + id))") ;;
    lapse-node:--coordinator) a=$(rehost "$a" "$base.10") ;;
  esac
  args+=("$a")
done
exec ip netns exec "$ns" "$real/$name" "${args[@]}"
