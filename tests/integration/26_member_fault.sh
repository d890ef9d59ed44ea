#!/bin/bash
# Member faulting (#10.7b) through the daemon: a member file truncated to 0 under the
# running daemon gives read errors (not zeros) and is FAULTED, the pool DEGRADED (REST
# and /metrics), data stays right; POST clear resets the counters and resilvers the
# member back ONLINE, which survives a restart. (Counters kept across restarts:
# tests/unit/test_vpool_fault.c.)
set -u
LAYOUT=${LAYOUT:-raidz1-inplace}   # 21_pool_log.sh runs it on raidz1 (log-structured)
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-fault.XXXXXX)
PAT=$ROOT/build/tools/iscsi_pattern
trap 'stop_nasd; rm -rf "$T"' EXIT
printf "pool_cache_mb = 4\npool_dirty_mb = 2\n" > "$T/nasd.conf"   # small: reads and writes go to the members
start_nasd "$T" --config "$T/nasd.conf"
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"$LAYOUT\",\"members\":[
  {\"path\":\"$T/d0.img\",\"size\":\"128M\",\"create\":true},{\"path\":\"$T/d1.img\",\"size\":\"128M\",\"create\":true},
  {\"path\":\"$T/d2.img\",\"size\":\"128M\",\"create\":true},{\"path\":\"$T/d3.img\",\"size\":\"128M\",\"create\":true}]}"
expect 201 POST volumes '{"pool":"tank","name":"vol1","size":"64M"}'
expect 201 POST exports/iscsi '{"name":"t1","volume":"tank/vol1"}'
URL=iscsi://127.0.0.1:$ISCSI_PORT/iqn.2026-12.io.nasd:t1/0
$PAT write "$URL" 7 48 >/dev/null || fail "initial write"

truncate -s 0 "$T/d2.img"
$PAT verify "$URL" 7 48 >/dev/null || fail "data wrong with a truncated member"
api GET pools/tank >/dev/null
[ "$(echo "$BODY" | jq -r .state)" = DEGRADED ] || fail "pool not DEGRADED: $BODY"
[ "$(echo "$BODY" | jq -r '.members[2].state')" = FAULTED ] || fail "member 2 not FAULTED: $BODY"
[ "$(echo "$BODY" | jq -r '.members[2].read_errors')" -ge 16 ] || fail "read errors not counted: $BODY"
M=$(curl -s "http://127.0.0.1:$HTTP_PORT/metrics")
echo "$M" | grep -q 'nasd_pool_member_faulted{pool="tank",member="2"} 1' || fail "metrics: member 2 not faulted"
echo "$M" | grep -q 'nasd_pool_state{pool="tank",state="DEGRADED"} 1' || fail "metrics: pool not DEGRADED"

expect 405 GET pools/tank/clear
expect 200 POST pools/tank/clear
for _ in $(seq 300); do
  api GET pools/tank >/dev/null
  [ "$(echo "$BODY" | jq -r .state)" = ONLINE ] && break
  sleep 0.2
done
[ "$(echo "$BODY" | jq -r .state)" = ONLINE ] || fail "not ONLINE after clear: $BODY"
[ "$(echo "$BODY" | jq -r '[.members[] | .read_errors + .write_errors + .checksum_errors] | add')" = 0 ] ||
  fail "counters not reset: $BODY"
$PAT verify "$URL" 7 48 >/dev/null || fail "data wrong after the resilver"
# cleared state survives a restart; the rebuilt member file is whole again
stop_nasd
start_nasd "$T" --config "$T/nasd.conf"
api GET pools/tank >/dev/null
[ "$(echo "$BODY" | jq -r .state)" = ONLINE ] || fail "not ONLINE after the restart: $BODY"
# the rebuilt member holds its share: take another one offline and read again
expect 200 POST pools/tank/offline '{"member":0}'
$PAT verify "$URL" 7 48 >/dev/null || fail "data wrong with member 0 offline after the resilver"
echo "26_member_fault: ok"
