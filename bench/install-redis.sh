#!/usr/bin/env bash
# Installs Debian's redis-server for the TTL benchmark's comparison, without
# letting the package start a Redis service (the benchmark starts its own on a
# free loopback port). Idempotent.
set -euo pipefail
command -v redis-server >/dev/null && exit 0
[[ $(id -u) -eq 0 ]] || { echo "install-redis: run as root" >&2; exit 1; }
policy=/usr/sbin/policy-rc.d
created=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; created=1
fi
trap '((created)) && rm -f "$policy"' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends redis-server >/dev/null
