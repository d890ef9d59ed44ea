#!/bin/bash
# Per-export CPU time: while a client drives one export (iSCSI with iscsi-perf, then NFS
# with bench/nfs_bench), the CPU nasd charges to that export must account for most of the
# CPU the whole process used (and not more).
set -u
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-cpu.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
start_nasd "$T"
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"stripe\",\"members\":[{\"path\":\"$T/d0.img\",\"size\":\"256M\",\"create\":true}]}"
expect 201 POST volumes '{"pool":"tank","name":"v","size":"64M"}'
expect 201 POST exports/iscsi '{"name":"t1","volume":"tank/v"}'
HZ=$(getconf CLK_TCK)
proc_cpu() { awk -v hz=$HZ '{printf "%.3f", ($14 + $15) / hz}' /proc/$NASD_PID/stat; }
export_cpu() { curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | awk -v k="$1" 'index($0, "nasd_export_cpu_seconds_total{" k "}") == 1 {print $2}'; }
# charged_share LABELS CMD...: runs CMD, prints the process and export CPU and checks the share
charged_share() {
  local labels=$1; shift
  local p0 e0 p1 e1 used charged share
  p0=$(proc_cpu); e0=$(export_cpu "$labels")
  "$@" >/dev/null 2>&1 || fail "load generator failed: $*"
  p1=$(proc_cpu); e1=$(export_cpu "$labels")
  read -r used charged share < <(awk -v p0=$p0 -v p1=$p1 -v e0=${e0:-0} -v e1=${e1:-0} \
    'BEGIN { u = p1 - p0; c = e1 - e0; printf "%.3f %.3f %.0f\n", u, c, (u > 0 ? 100 * c / u : 0) }')
  echo "$labels: process CPU ${used}s, charged to the export ${charged}s (${share}%)"
  awk -v u=$used 'BEGIN { exit !(u > 0.2) }' || fail "the load used almost no CPU (${used}s)"
  [ "$share" -ge 50 ] || fail "only ${share}% of the CPU was charged to the export"
  [ "$share" -le 105 ] || fail "more CPU charged (${share}%) than the process used"
}
charged_share 'type="iscsi",export="t1"' \
  iscsi-perf -m 16 -b 8 -r -t 3 "iscsi://127.0.0.1:$ISCSI_PORT/iqn.2026-12.io.nasd:t1/0"
expect 201 POST datasets '{"pool":"tank","name":"s","mode":"0777"}'
expect 201 POST exports/nfs '{"dataset":"tank/s","root_squash":false}'
charged_share 'type="nfs",export="tank_s"' \
  "$ROOT/build/bench/nfs_bench" --server 127.0.0.1 --export /tank/s --nfsport $NFS_PORT --mountport $MOUNT_PORT \
  --dirs 2 --files 1000 --seconds 3 --size 67108864 --phases meta,data
