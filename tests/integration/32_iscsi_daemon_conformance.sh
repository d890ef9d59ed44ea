#!/bin/bash
# iscsi-test-cu against nasd itself: an iSCSI export created over REST whose LUN is a
# volume on a log-structured raidz1 pool of the pool engine (checksums, journal, cache,
# the location table and its log writes in the path). 38_iscsi_immediate.sh runs it on
# an in-place raidz1 pool.
# lane: side
set -u
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-cu.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
start_nasd "$T"
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"raidz1\",\"members\":[
  {\"path\":\"$T/d0.img\",\"size\":\"512M\",\"create\":true},{\"path\":\"$T/d1.img\",\"size\":\"512M\",\"create\":true},
  {\"path\":\"$T/d2.img\",\"size\":\"512M\",\"create\":true}]}"
expect 201 POST volumes '{"pool":"tank","name":"lun0","size":"256M"}'
expect 201 POST exports/iscsi '{"name":"conformance","volume":"tank/lun0"}'
run_iscsi_test_cu "iscsi://127.0.0.1:$ISCSI_PORT/iqn.2026-12.io.nasd:conformance/0" "$T/cu.log" || exit 1
kill -0 $NASD_PID 2>/dev/null || fail "nasd died"
[ "$(api GET pools/tank | jq -r .unrepairable)" = 0 ] || fail "pool reports unrepairable errors: $BODY"
