#!/bin/bash
# full matrix: 3 alternating rounds, 10 s measured after 1 s warm-up each
cd "$(dirname "$0")"
for r in 1 2 3; do
  for a in "reqrep" "stream" "reqrep -c" "stream -n 4" "reqrep -a" "stream -a" "stream -a -n 4"; do
    echo -n "round=$r "; ./run1.sh $a -w 1 -d 10
  done
done
for r in 1 2; do
  for a in "reqrep -t 1" "stream -t 1"; do echo -n "round=$r "; ./run1.sh $a -w 1 -d 10; done
done
