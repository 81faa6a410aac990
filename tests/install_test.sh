#!/usr/bin/env bash
# install_test: what `make install` puts under a prefix is enough to run a
# cluster and to build a client program.
#
#   tests/install_test.sh BUILD_DIR SOURCE_DIR CC LIBDIR [EXTRA_CFLAGS]
#
# 1. `cmake --install BUILD_DIR --prefix TMP` installs the daemons, the CLI,
#    liblapse.so (with its SONAME links), liblapse.a, lapse.h, lapse_err.h
#    and lapse.pc;
# 2. client/examples/put_get.c builds against that copy with
#    `pkg-config --cflags --libs lapse` (shared) and against liblapse.a
#    (--static), and ldd resolves liblapse from the prefix;
# 3. the shared example fails cleanly (exit 1, a message) with no coordinator;
# 4. the installed coordinator and node start from config files (--config,
#    with a flag overriding a bad file setting), on free loopback ports; both
#    examples put and get against them and the installed CLI reads the item;
# 5. a bad config file is refused with FILE:LINE and exit status 2.
# EXTRA_CFLAGS: the sanitizer flags of a LAPSE_SANITIZE build (an
# instrumented liblapse needs an instrumented program).
set -euo pipefail

build=$1 src=$2 cc=$3 libdir=$4 extra_cflags=${5:-}
tmp_root=${LAPSE_TEST_TMP:-/tmp}
mkdir -p "$tmp_root"
tmp=$(mktemp -d "$tmp_root/install_test.XXXXXX")
prefix=$tmp/prefix
pids=()

cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
  echo "install_test: FAIL: $*" >&2
  for log in "$tmp"/*.log; do
    [[ -f $log ]] && { echo "--- $log" >&2; tail -n 20 "$log" >&2; }
  done
  exit 1
}

# ---------------------------------------------------------------- install
cmake --install "$build" --prefix "$prefix" >"$tmp/install.out" || fail "cmake --install failed"
for f in bin/lapse-coordinator bin/lapse-node bin/lapse "$libdir/liblapse.a" \
  include/lapse/lapse.h include/lapse/lapse_err.h "$libdir/pkgconfig/lapse.pc"; do
  [[ -f $prefix/$f ]] || fail "$f was not installed"
done
for f in bin/lapse-coordinator bin/lapse-node bin/lapse; do
  [[ -x $prefix/$f ]] || fail "$f is not executable"
done
so=$prefix/$libdir/liblapse.so
[[ -L $so && -L $so.0 ]] || fail "liblapse.so and liblapse.so.0 should be symlinks"
[[ -f $(readlink -f "$so") ]] || fail "liblapse.so dangles"
soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[[ $soname == liblapse.so.0 ]] || fail "SONAME is '$soname', want liblapse.so.0"
[[ $(readlink -f "$so") == $(readlink -f "$so.0") ]] || fail "the SONAME link differs"

# ---------------------------------------------------------------- build with pkg-config
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
unset PKG_CONFIG_LIBDIR
pkg-config --exists lapse || fail "pkg-config does not find lapse.pc"
cflags=$(pkg-config --cflags lapse)
libs=$(pkg-config --libs lapse)
[[ $cflags == *"$prefix/include/lapse"* ]] || fail "Cflags '$cflags' do not name the prefix"
[[ $libs == *"-L$prefix/$libdir"* ]] || fail "Libs '$libs' do not name the prefix"
# shellcheck disable=SC2086 # word splitting of compiler flags is intended
"$cc" -std=c11 -Wall -Wextra -Werror $extra_cflags "$src/client/examples/put_get.c" \
  $cflags $libs -o "$tmp/put_get" 2>"$tmp/cc.log" || fail "put_get does not build: $(cat "$tmp/cc.log")"
# The static library on its own (plus Libs.private): no liblapse.so needed.
static_libs=$(pkg-config --static --libs lapse)
static_libs=${static_libs/-llapse/-Wl,-Bstatic -llapse -Wl,-Bdynamic}
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror $extra_cflags "$src/client/examples/put_get.c" \
  $cflags $static_libs -o "$tmp/put_get_static" 2>"$tmp/cc.log" ||
  fail "put_get does not build against liblapse.a: $(cat "$tmp/cc.log")"

export LD_LIBRARY_PATH=$prefix/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ldd "$tmp/put_get" >"$tmp/ldd.out" 2>&1 || fail "ldd put_get: $(cat "$tmp/ldd.out")"
grep -q "liblapse.so.0 => $prefix/$libdir/liblapse.so.0" "$tmp/ldd.out" ||
  fail "put_get does not resolve liblapse from the prefix: $(cat "$tmp/ldd.out")"
! grep -q "not found" "$tmp/ldd.out" || fail "unresolved libraries: $(cat "$tmp/ldd.out")"
ldd "$tmp/put_get_static" >"$tmp/ldd.out" 2>&1 || true
! grep -q liblapse "$tmp/ldd.out" || fail "the static build still needs liblapse.so"
# The installed CLI finds liblapse by its RUNPATH, without LD_LIBRARY_PATH.
env -u LD_LIBRARY_PATH ldd "$prefix/bin/lapse" >"$tmp/ldd.out" 2>&1 || true
grep -q "liblapse.so.0 => $prefix/bin/../$libdir/liblapse.so.0" "$tmp/ldd.out" ||
  fail "the installed lapse CLI does not find liblapse: $(cat "$tmp/ldd.out")"

# ---------------------------------------------------------------- no coordinator
# True when nobody accepts connections on 127.0.0.1:$1.
port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
random_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    port_free "$p" && { echo "$p"; return; }
  done
}
# Port 1 (tcpmux) is not in the range other tests pick free ports from.
dead=1
port_free "$dead" || dead=$(random_port)
rc=0
LAPSE_COORDINATOR=tcp://127.0.0.1:$dead "$tmp/put_get" >"$tmp/dead.out" 2>"$tmp/dead.err" || rc=$?
[[ $rc -eq 1 ]] || fail "put_get without a coordinator exited $rc, want 1"
grep -q "^put_get: .*127.0.0.1:$dead" "$tmp/dead.err" ||
  fail "put_get without a coordinator said: $(cat "$tmp/dead.err")"

# ---------------------------------------------------------------- a real cluster
# Waits up to $2 s for "$1" (a shell command) to succeed.
wait_for() {
  local deadline=$((SECONDS + $2))
  until eval "$1" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}
lapse_cli() {
  "$prefix/bin/lapse" --coordinator "$coord_url" --timeout-ms 2000 "$@"
}

# Starts "$@" (a daemon) in the background; its pid is appended to pids.
spawn() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 </dev/null &
  pids+=($!)
}

# The coordinator: a config file whose data dir is unusable (below a plain
# file) and a --data flag that fixes it: it starts only if the flag wins.
touch "$tmp/not-a-dir"
coord_url=
for attempt in 1 2 3 4 5; do
  port=$(random_port)
  cat >"$tmp/coordinator.conf" <<CONF
# written by install_test
listen = tcp://127.0.0.1:$port
data = $tmp/not-a-dir/coordinator   # overridden on the command line
heartbeat-timeout-ms = 3000
log-level = info
CONF
  spawn "$tmp/coordinator.log" "$prefix/bin/lapse-coordinator" --config "$tmp/coordinator.conf" \
    --data "$tmp/coordinator"
  coord_url=tcp://127.0.0.1:$port
  # Answers, or exited (its port was taken meanwhile: try another).
  wait_for "lapse_cli list-tables || ! kill -0 ${pids[-1]}" 20 ||
    fail "the coordinator does not answer on $coord_url"
  kill -0 "${pids[-1]}" 2>/dev/null && break
  coord_url=
done
[[ -n $coord_url ]] || fail "the coordinator did not start"

node_up() {
  lapse_cli cluster-status | grep -q '"State": *"UP"'
}
for attempt in 1 2 3 4 5; do
  port=$(random_port)
  cat >"$tmp/node1.conf" <<CONF
id = 1
listen = tcp://127.0.0.1:$port
coordinator = $coord_url
data = $tmp/node1
workers = 2

ttl-workers = 1
CONF
  spawn "$tmp/node1.log" "$prefix/bin/lapse-node" --config "$tmp/node1.conf"
  wait_for "node_up || ! kill -0 ${pids[-1]}" 20 || fail "node 1 did not register"
  kill -0 "${pids[-1]}" 2>/dev/null && break
done
node_up || fail "node 1 did not start"

LAPSE_COORDINATOR=$coord_url "$tmp/put_get" >"$tmp/put_get.out" 2>"$tmp/put_get.log" ||
  fail "put_get (shared) failed: $(cat "$tmp/put_get.log")"
grep -q '"alice"' "$tmp/put_get.out" || fail "put_get printed: $(cat "$tmp/put_get.out")"
LAPSE_COORDINATOR=$coord_url "$tmp/put_get_static" >"$tmp/put_get.out" 2>"$tmp/put_get.log" ||
  fail "put_get (static) failed: $(cat "$tmp/put_get.log")"
grep -q '"alice"' "$tmp/put_get.out" || fail "put_get_static printed: $(cat "$tmp/put_get.out")"
lapse_cli get Users '{"UserName":{"S":"alice"}}' >"$tmp/get.out" 2>"$tmp/get.log" ||
  fail "lapse get failed: $(cat "$tmp/get.log")"
grep -q '"Age"' "$tmp/get.out" || fail "lapse get printed: $(cat "$tmp/get.out")"

# ---------------------------------------------------------------- bad config files
printf 'id = 2\nlisten = tcp://127.0.0.1:1\nworkers = many\n' >"$tmp/bad.conf"
rc=0
"$prefix/bin/lapse-node" --config "$tmp/bad.conf" --data "$tmp/bad" 2>"$tmp/bad.err" || rc=$?
[[ $rc -eq 2 ]] || fail "a bad value in a config file exited $rc, want 2"
grep -q "$tmp/bad.conf:3: --workers" "$tmp/bad.err" || fail "bad value: $(cat "$tmp/bad.err")"
printf 'data = /x\nport = 7400\n' >"$tmp/bad.conf"
rc=0
"$prefix/bin/lapse-coordinator" --config "$tmp/bad.conf" 2>"$tmp/bad.err" || rc=$?
[[ $rc -eq 2 ]] || fail "an unknown key exited $rc, want 2"
grep -q "$tmp/bad.conf:2: unknown key 'port'" "$tmp/bad.err" || fail "unknown key: $(cat "$tmp/bad.err")"
rc=0
"$prefix/bin/lapse-coordinator" --config "$tmp/missing.conf" 2>"$tmp/bad.err" || rc=$?
[[ $rc -eq 2 ]] || fail "a missing config file exited $rc, want 2"
[[ ! -e $tmp/bad ]] || fail "a refused node created its data dir"

echo "install_test: ok (prefix layout, pkg-config shared and static builds, config files, put/get)"
