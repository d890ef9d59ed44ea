#!/bin/bash
# The snapshot tests on a log-structured raidz1 pool (format 3): volume snapshots with
# rollback, clone, resilver and import (63), dataset snapshots over NFS (64), send and
# receive between two daemons (65), kill -9 during snapshot operations (66).
set -u
D=$(dirname "$0")
for t in 63_snapshots_volume 64_snapshots_dataset 65_send_receive 66_snapshots_kill; do
    echo "== $t on raidz1 (log-structured)"
    LAYOUT=raidz1 "$D/$t.sh" || { echo "FAIL: $t on raidz1 (log-structured)"; exit 1; }
done
echo "snapshots on raidz1 (log-structured): ok"
