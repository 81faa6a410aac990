#!/usr/bin/env bash
# deploy_config_test: the example config files in deploy/config/ are valid
# for the daemons built here, as written and with every commented setting
# switched on (so the defaults they show parse), and they list every flag
# the daemon's --help lists. etcd.env (lapse-etcd.service's environment):
# every ETCD_ variable in it, live or commented, is a flag of the etcd
# installed here, its data dir is the unit's StateDirectory, and a real etcd
# started from it (commented settings switched on, addresses moved to free
# loopback ports, a cluster of this one member) becomes healthy without
# warning about any variable.
#
#   tests/deploy_config_test.sh CONFIG_DIR BIN_DIR
set -euo pipefail

dir=$1 bin=$2
tmp_root=${LAPSE_TEST_TMP:-/tmp}
mkdir -p "$tmp_root"
tmp=$(mktemp -d "$tmp_root/deploy_config_test.XXXXXX")
etcd_pid=
cleanup() {
  [[ -z $etcd_pid ]] || { kill -KILL "$etcd_pid" 2>/dev/null; wait "$etcd_pid" 2>/dev/null; } || true
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
  echo "deploy_config_test: FAIL: $*" >&2
  exit 1
}

# The daemon reads the file and stops at --help (exit 0): every key is known
# and every value valid.
check_parses() {
  local daemon=$1 conf=$2 rc=0
  "$bin/$daemon" --config "$conf" --help >"$tmp/out" 2>"$tmp/err" || rc=$?
  [[ $rc -eq 0 ]] || fail "$daemon --config $conf: exit $rc: $(cat "$tmp/err")"
  grep -q '^usage:' "$tmp/out" || fail "$daemon --config $conf --help printed no usage"
}

check() {
  local daemon=$1 conf=$2
  [[ -f $conf ]] || fail "$conf is missing"
  check_parses "$daemon" "$conf"
  # "# key = value" lines become settings.
  sed -E 's/^#[[:space:]]*([a-z][a-z0-9-]* = )/\1/' "$conf" >"$tmp/all.conf"
  # A setting both live and commented (e.g. advertise) would now be doubled.
  awk -F' = ' '/^[a-z][a-z0-9-]* = / && seen[$1]++ { next } { print }' "$tmp/all.conf" \
    >"$tmp/all-once.conf"
  check_parses "$daemon" "$tmp/all-once.conf"
  local flag
  for flag in $("$bin/$daemon" --help | sed -nE 's/^  --([a-z][a-z0-9-]*).*/\1/p'); do
    [[ $flag == help || $flag == config ]] && continue
    grep -qE "^(#[[:space:]]*)?$flag = " "$conf" || fail "$conf does not list $flag"
  done
}

check lapse-coordinator "$dir/coordinator.conf"
for i in 1 2 3; do
  check lapse-node "$dir/node$i.conf"
  grep -q "^id = $i\$" "$dir/node$i.conf" || fail "node$i.conf does not set id = $i"
  grep -q "^data = /var/lib/lapse/node$i\$" "$dir/node$i.conf" ||
    fail "node$i.conf's data is not /var/lib/lapse/node$i (the unit's StateDirectory)"
done
grep -q '^data = /var/lib/lapse/coordinator$' "$dir/coordinator.conf" ||
  fail "coordinator.conf's data is not /var/lib/lapse/coordinator (the unit's StateDirectory)"

# ---------------------------------------------------------------- etcd.env
env_file=$dir/etcd.env
[[ -f $env_file ]] || fail "$env_file is missing"
etcd_bin=$(command -v etcd) || fail "no etcd in PATH (deploy/install-deps.sh installs etcd-server)"
etcd_flags=$("$etcd_bin" --help 2>&1 | sed -nE 's/^  --([a-z][a-z0-9-]*).*/\1/p' | sort -u)
[[ $(wc -l <<<"$etcd_flags") -gt 30 ]] || fail "etcd --help lists no flags: $("$etcd_bin" --help 2>&1 | head -5)"
# "#ETCD_X=v" lines become settings, like the daemons' commented ones.
sed -E 's/^#(ETCD_[A-Z0-9_]+=)/\1/' "$env_file" >"$tmp/etcd-all.env"
n=0
while IFS= read -r line; do
  [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
  [[ $line =~ ^(ETCD_[A-Z0-9_]+)=(.+)$ ]] || fail "$env_file: not VAR=value: '$line'"
  flag=$(tr 'A-Z_' 'a-z-' <<<"${BASH_REMATCH[1]#ETCD_}")
  grep -qx -- "$flag" <<<"$etcd_flags" || fail "$env_file: ${BASH_REMATCH[1]} is no etcd flag (--$flag)"
  n=$((n + 1))
done <"$tmp/etcd-all.env"
((n >= 10)) || fail "$env_file sets only $n variables"
grep -q '^ETCD_DATA_DIR=/var/lib/lapse/etcd$' "$env_file" ||
  fail "etcd.env's ETCD_DATA_DIR is not /var/lib/lapse/etcd (lapse-etcd.service's StateDirectory)"

# Two free loopback ports, never Debian's 2379/2380.
free_port() {
  local p i
  for ((i = 0; i < 50; i++)); do
    p=$((20000 + RANDOM % 20000))
    [[ $p != "${taken:-}" ]] || continue
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
    echo "$p"
    return 0
  done
  fail "no free port"
}
# Starts etcd from etcd.env on two free ports and waits until it is
# healthy: 0; 2 when a port was taken meanwhile (another test picked it:
# the caller tries new ones); fails otherwise.
start_etcd() {
  cport=$(free_port)
  taken=$cport pport=$(free_port)
  # This host's addresses become 127.0.0.1 and the ports free ones; the
  # cluster is this member alone (so it elects itself).
  sed -E -e "s#^ETCD_DATA_DIR=.*#ETCD_DATA_DIR=$tmp/etcd-data#" \
    -e "s#^ETCD_INITIAL_CLUSTER=.*#ETCD_INITIAL_CLUSTER=e1=http://127.0.0.1:$pport#" \
    -e "s#http://[0-9.]+:2379#http://127.0.0.1:$cport#g" -e "s#http://[0-9.]+:2380#http://127.0.0.1:$pport#g" \
    "$tmp/etcd-all.env" | grep -E '^ETCD_' >"$tmp/etcd-run.env"
  grep -q "^ETCD_NAME=e1$" "$tmp/etcd-run.env" || fail "etcd.env's member is not e1 (as in ETCD_INITIAL_CLUSTER)"
  mapfile -t etcd_env <"$tmp/etcd-run.env"
  rm -rf "$tmp/etcd-data"
  env -i PATH="$PATH" "${etcd_env[@]}" "$etcd_bin" >"$tmp/etcd.log" 2>&1 &
  etcd_pid=$!
  local deadline=$((SECONDS + 20))
  until ETCDCTL_API=3 etcdctl --endpoints "http://127.0.0.1:$cport" --dial-timeout=1s --command-timeout=2s \
    endpoint health >/dev/null 2>&1; do
    if ! kill -0 "$etcd_pid" 2>/dev/null; then
      wait "$etcd_pid" 2>/dev/null || true
      etcd_pid=
      grep -qi "address already in use" "$tmp/etcd.log" && return 2
      fail "etcd from etcd.env exited: $(tail -n 5 "$tmp/etcd.log")"
    fi
    ((SECONDS < deadline)) || fail "etcd from etcd.env not healthy within 20 s: $(tail -n 5 "$tmp/etcd.log")"
    sleep 0.2
  done
}
started=0
for _ in 1 2 3; do
  rc=0
  start_etcd || rc=$?
  if ((rc == 0)); then started=1; break; fi
done
((started)) || fail "etcd from etcd.env: its ports were taken three times: $(tail -n 5 "$tmp/etcd.log")"
if grep -Ei 'unrecognized environment|shadowed|unknown' "$tmp/etcd.log"; then
  fail "etcd complained about etcd.env"
fi
grep -q '"pre-vote":true' "$tmp/etcd.log" || fail "etcd did not take ETCD_PRE_VOTE: $(head -c 2000 "$tmp/etcd.log")"
kill -TERM "$etcd_pid"
wait "$etcd_pid" 2>/dev/null || true
etcd_pid=

echo "deploy_config_test: ok"
