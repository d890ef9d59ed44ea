#!/bin/bash
# The snapshot tests on a log-structured raidz1 pool (format 3): volume snapshots with
# rollback, clone, resilver and import (63), dataset snapshots over NFS (64), send and
# receive between two daemons (65), kill -9 during snapshot operations (66).
set -u
. "$(dirname "$0")/lib.sh"
run_on_layout raidz1 63_snapshots_volume 64_snapshots_dataset 65_send_receive 66_snapshots_kill
echo "snapshots on raidz1 (log-structured): ok"
