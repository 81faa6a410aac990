#!/usr/bin/env bash
# netns-daemon.sh: lapse-chaos's stand-in for lapse-coordinator and
# lapse-node in its network-namespace mode (docs/chaos.md "partition").
#
# lapse-chaos links this file under both names into a directory it gives
# tests/cluster.c as the bin dir. cluster.c starts daemons on 127.0.0.1
# ports; this script moves each into its namespace of the network made by
# deploy/netns-cluster.sh net-up and rewrites the addresses to match:
#
#   lapse-coordinator   namespace P-c    --listen tcp://0.0.0.0:PORT (all of
#                                        P-c: its loopback, where lapse-chaos
#                                        itself runs, and BASE.10 for nodes)
#   lapse-node --id N   namespace P-nN   --listen tcp://BASE.(10+N):PORT,
#                                        --coordinator tcp://BASE.10:PORT,
#                                        --metrics-listen BASE.(10+N):PORT
#
# Ports are kept. `ip netns exec` and this script both exec, so the daemon
# keeps the pid cluster.c spawned: kill -9, SIGSTOP and reaping work as on
# loopback. Set by lapse-chaos: LAPSE_CHAOS_NETNS_PREFIX (P),
# LAPSE_CHAOS_NETNS_BASE (BASE, e.g. 10.77.0), LAPSE_CHAOS_REAL_BIN_DIR.
set -eu

prefix=${LAPSE_CHAOS_NETNS_PREFIX:?not set: run by lapse-chaos only}
base=${LAPSE_CHAOS_NETNS_BASE:?not set: run by lapse-chaos only}
real=${LAPSE_CHAOS_REAL_BIN_DIR:?not set: run by lapse-chaos only}
name=${0##*/}

id=
prev=
for a in "$@"; do
  [[ $prev == --id ]] && id=$a
  prev=$a
done

case $name in
  lapse-coordinator) ns=$prefix-c ;;
  lapse-node)
    [[ $id =~ ^[123]$ ]] || { echo "netns-daemon: node id '$id' is not 1, 2 or 3" >&2; exit 2; }
    ns=$prefix-n$id
    ;;
  *) echo "netns-daemon: run as lapse-coordinator or lapse-node, not $name" >&2; exit 2 ;;
esac

# tcp://127.0.0.1:PORT or 127.0.0.1:PORT, with the host replaced by $2.
rehost() {
  case $1 in
    tcp://127.0.0.1:*) echo "tcp://$2:${1#tcp://127.0.0.1:}" ;;
    127.0.0.1:*) echo "$2:${1#127.0.0.1:}" ;;
    *) echo "$1" ;;
  esac
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
