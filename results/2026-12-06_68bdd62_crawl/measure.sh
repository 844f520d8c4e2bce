#!/bin/sh
cd /tmp
for r in 1 2 3; do
  for bin in base after; do
    for be in epoll uring; do
      /tmp/up-crawl -server /tmp/up-server-$bin -backend $be -n ${N:-5000} -runs 1 2>&1 | sed "s/^/bin=$bin round=$r /"
    done
  done
done
