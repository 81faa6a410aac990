#!/usr/bin/env bash
# systemd_units_test: deploy/systemd's units (the coordinator, the node, the
# etcd member) pass `systemd-analyze verify` with no complaint at all
# (warnings count as failures) and carry the settings docs/operations.md
# promises (restart, state directory, hardening, config file).
#
#   tests/systemd_units_test.sh UNIT_DIR BIN_DIR
#
# verify insists that ExecStart's binary exists, so the units are checked
# in a temporary copy whose /usr/local/bin/ is replaced by BIN_DIR, and
# lapse-etcd's /usr/bin/etcd by the etcd in PATH. Exits 77
# (ctest's SKIP_RETURN_CODE) where systemd-analyze is absent or cannot
# verify even a trivial unit (some containers).
set -euo pipefail

units=$1 bin=$2
command -v systemd-analyze >/dev/null 2>&1 || {
  echo "systemd_units_test: SKIP: no systemd-analyze"
  exit 77
}
tmp_root=${LAPSE_TEST_TMP:-/tmp}
mkdir -p "$tmp_root"
tmp=$(mktemp -d "$tmp_root/systemd_units_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "systemd_units_test: FAIL: $*" >&2
  exit 1
}

# Prints verify's complaints about unit file $1; returns its status.
verify() {
  (cd "$tmp" && systemd-analyze verify "$1" 2>&1)
}

printf '[Service]\nExecStart=/bin/true\n' >"$tmp/lapse-probe.service"
if ! out=$(verify "$tmp/lapse-probe.service") || [[ -n $out ]]; then
  echo "systemd_units_test: SKIP: systemd-analyze verify does not work here: $out"
  exit 77
fi

for unit in lapse-coordinator.service lapse-node@.service; do
  [[ -f $units/$unit ]] || fail "$units/$unit is missing"
  grep -q '^ExecStart=/usr/local/bin/lapse-' "$units/$unit" || fail "$unit: ExecStart is not /usr/local/bin"
  for want in 'Restart=on-failure' 'StateDirectory=lapse/' 'NoNewPrivileges=yes' \
    'ProtectSystem=strict' 'PrivateTmp=yes' 'LimitNOFILE=' 'User=lapse' ' --config /etc/lapse/'; do
    grep -q -- "$want" "$units/$unit" || fail "$unit lacks $want"
  done
  sed "s|/usr/local/bin/|$bin/|g" "$units/$unit" >"$tmp/$unit"
done
grep -q 'node%i.conf' "$units/lapse-node@.service" || fail "lapse-node@ does not read node%i.conf"

# The etcd member: Debian's etcd binary, settings in an environment file,
# its own state directory, and never beside Debian's default etcd.service.
unit=lapse-etcd.service
[[ -f $units/$unit ]] || fail "$units/$unit is missing"
for want in '^ExecStart=/usr/bin/etcd$' '^EnvironmentFile=/etc/lapse/etcd.env$' '^Type=notify$' \
  '^StateDirectory=lapse/etcd$' '^StateDirectoryMode=0700$' '^Conflicts=etcd.service$' \
  '^Restart=on-failure$' '^User=etcd$' '^NoNewPrivileges=yes$' '^ProtectSystem=strict$' \
  '^PrivateTmp=yes$' '^LimitNOFILE=' '^CapabilityBoundingSet=$'; do
  grep -q -- "$want" "$units/$unit" || fail "$unit lacks $want"
done
etcd_bin=$(command -v etcd) || fail "no etcd in PATH (deploy/install-deps.sh installs etcd-server)"
sed "s|^ExecStart=/usr/bin/etcd\$|ExecStart=$etcd_bin|" "$units/$unit" >"$tmp/$unit"
# The coordinator and nodes start after a member on the same host.
for u in lapse-coordinator.service lapse-node@.service; do
  grep -q '^After=.*lapse-etcd.service' "$units/$u" || fail "$u is not ordered after lapse-etcd.service"
done

for unit in lapse-coordinator.service lapse-node@.service lapse-node@1.service lapse-etcd.service; do
  if ! out=$(verify "$tmp/$unit") || [[ -n $out ]]; then
    fail "systemd-analyze verify $unit: $out"
  fi
done
# The check is real: a unit with a mistake is reported.
printf 'Restart=sometimes\n' >>"$tmp/lapse-coordinator.service"
out=$(verify "$tmp/lapse-coordinator.service") || true
[[ -n $out ]] || fail "systemd-analyze verify missed a bad Restart= value"
sed -i 's/^Type=notify$/Type=sometimes/' "$tmp/lapse-etcd.service"
out=$(verify "$tmp/lapse-etcd.service") || true
[[ -n $out ]] || fail "systemd-analyze verify missed a bad Type= value in lapse-etcd.service"

echo "systemd_units_test: ok"
