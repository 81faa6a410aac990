#!/bin/bash
# plain sockets read by a thread each (raw) against NNG's stream API: 3 alternating rounds of
# 16 blocking threads and of 16 calls in flight, the server in stream mode then in raw mode
cd "$(dirname "$0")"
for r in 1 2 3; do
  for a in "" "-a"; do
    echo -n "round=$r server=stream "; ./run1.sh stream $a -w 1 -d 5
    echo -n "round=$r server=stream "; SPIKE_SERVER=stream ./run1.sh raw $a -w 1 -d 5
    echo -n "round=$r server=raw "; ./run1.sh raw $a -w 1 -d 5
  done
done
