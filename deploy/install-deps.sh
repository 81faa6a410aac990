#!/usr/bin/env bash
# Installs the Debian packages Lapse builds and tests with. Idempotent: installs
# only what is missing, and does nothing when everything is present.
# Needs root, or sudo without a password.
# Debian's etcd-server package may start a default etcd on 2379/2380 (where
# systemd runs): Lapse never uses or collides with it; its scripts and tests
# start their own members on their own ports and data dirs.
set -euo pipefail

pkgs=(
  build-essential cmake pkg-config clang libclang-rt-14-dev
  libnng-dev libprotobuf-c-dev protobuf-c-compiler
  libmicrohttpd-dev  # the DynamoDB gateway's HTTP server (rpc/http_service.c)
  librocksdb-dev libxxhash-dev libcmocka-dev libjansson-dev
  libcurl4-openssl-dev libssl-dev etcd-server etcd-client
  prometheus curl iproute2 python3
  awscli python3-boto3 python3-pytest
  re2c lemon
  wrk  # lapse-ddb-bench drives the DynamoDB gateway with it (bench/ddb_bench.c)
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo -n)
else
  echo "install-deps: missing ${missing[*]}; run as root or install sudo" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q >&2
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
