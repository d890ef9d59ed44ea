#!/bin/bash
# 20_pool_engine.sh on a log-structured raidz1 pool (format 3, storage/pool/vpool_xlog.c):
# corruption + scrub, offline/online, a lost member replaced, kill -9 during FUA writes,
# import into a fresh database.
LAYOUT=raidz1 exec "$(dirname "$0")/20_pool_engine.sh"
