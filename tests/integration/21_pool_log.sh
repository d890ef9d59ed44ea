#!/bin/bash
# The pool engine flows on a log-structured raidz1 pool (format 3, storage/pool/vpool_xlog.c),
# whose default runs are on raidz1-inplace: 20_pool_engine.sh (corruption + scrub,
# offline/online, a lost member replaced, kill -9 during FUA writes, import into a fresh
# database), 26_member_fault.sh (a member truncated under the daemon, clear + resilver),
# 43_dataset_engine.sh (datasets: space, lz4, kill -9, a damaged member, import).
set -u
. "$(dirname "$0")/lib.sh"
run_on_layout raidz1 20_pool_engine 26_member_fault 43_dataset_engine
echo "pool engine flows on raidz1 (log-structured): ok"
