#!/bin/bash
# usage: run1.sh reqrep|stream|raw [client opts...]: one measured run, one line of figures
# (SPIKE_SERVER=stream|raw: the server in another mode than the client).
# Builds server and client into $SPIKE_BIN (default /tmp/transport-spike) on first use;
# logs go there too.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${SPIKE_BIN:-/tmp/transport-spike}
mkdir -p "$BIN"
for p in server client; do
  if [ ! -x "$BIN/$p" ] || [ "$HERE/$p.c" -nt "$BIN/$p" ]; then
    gcc -std=c11 -O2 -pthread -Wall -Wextra -o "$BIN/$p" "$HERE/$p.c" -lnng || exit 1
  fi
done
MODE=$1; shift
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
SF=$(mktemp "$BIN/srvstats.XXXX"); rm -f "$SF"
"$BIN/server" "${SPIKE_SERVER:-$MODE}" "$PORT" "$SF" 2>>"$BIN/server.log" & SPID=$!
sleep 0.3
"$BIN/client" "$MODE" "$PORT" "$SPID" "$SF" "$@" 2>>"$BIN/client.log"; RC=$?
kill -TERM $SPID; wait $SPID; rm -f "$SF"
[ $RC -ne 0 ] && echo "CLIENT EXIT $RC (errors/timeouts, see $BIN/client.log)"
exit $RC
