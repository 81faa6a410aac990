#!/bin/bash
# 5 more alternating rounds of the 4 main modes; prints CPU steal ticks (/proc/stat) per run
cd "$(dirname "$0")"
for r in 1 2 3 4 5; do
  for a in "reqrep" "stream" "reqrep -a" "stream -a"; do
    s0=$(awk '/^cpu /{print $9}' /proc/stat)
    echo -n "round=$r "; ./run1.sh $a -w 1 -d 10 | tr -d '\n'
    echo " steal_ticks=$(( $(awk '/^cpu /{print $9}' /proc/stat) - s0 ))"
  done
done
