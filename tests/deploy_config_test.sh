#!/usr/bin/env bash
# deploy_config_test: the example config files in deploy/config/ are valid
# for the daemons built here, as written and with every commented setting
# switched on (so the defaults they show parse), and they list every flag
# the daemon's --help lists.
#
#   tests/deploy_config_test.sh CONFIG_DIR BIN_DIR
set -euo pipefail

dir=$1 bin=$2
tmp_root=${LAPSE_TEST_TMP:-/tmp}
mkdir -p "$tmp_root"
tmp=$(mktemp -d "$tmp_root/deploy_config_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

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

echo "deploy_config_test: ok"
