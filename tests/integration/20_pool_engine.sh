#!/bin/bash
# The pool engine through the daemon: data written over iSCSI survives a corrupted
# member (scrub repairs it), an offline member (DEGRADED, resilver on online), a lost
# member (replace + resilver), kill -9 during writes, and an import into a fresh DB.
# Default: the in-place raidz1 (raidz1-inplace); LAYOUT=raidz1 runs the same on the
# log-structured raidz1 (21_pool_log.sh).
set -u
LAYOUT=${LAYOUT:-raidz1-inplace}
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-pool.XXXXXX)
PAT=$ROOT/build/tools/iscsi_pattern
trap 'stop_nasd; [ -n "${WPID:-}" ] && kill $WPID 2>/dev/null; rm -rf "$T"' EXIT
start_nasd "$T"
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"$LAYOUT\",\"members\":[
  {\"path\":\"$T/d0.img\",\"size\":\"256M\",\"create\":true},{\"path\":\"$T/d1.img\",\"size\":\"256M\",\"create\":true},
  {\"path\":\"$T/d2.img\",\"size\":\"256M\",\"create\":true},{\"path\":\"$T/d3.img\",\"size\":\"256M\",\"create\":true}]}"
expect 201 POST volumes '{"pool":"tank","name":"vol1","size":"96M"}'
expect 201 POST exports/iscsi '{"name":"t1","volume":"tank/vol1"}'
URL=iscsi://127.0.0.1:$ISCSI_PORT/iqn.2026-12.io.nasd:t1/0
pool_state() { api GET pools/tank | jq -r .state; }
wait_background() {
  for _ in $(seq 300); do
    [ "$(api GET pools/tank/scrub | jq -r '.scrub.running or .resilver.running')" = false ] && return 0
    sleep 0.2
  done
  fail "scrub/resilver did not finish"
}

$PAT write "$URL" 1 64 >/dev/null || fail "initial write"
[ "$(api GET volumes/tank/vol1 | jq -r .used)" -ge $((64 << 20)) ] || fail "volume used < written: $BODY"

# 1. silent corruption of one member: reads still right after a restart (no cache), scrub repairs
stop_nasd
dd if=/dev/urandom of="$T/d1.img" bs=1M seek=20 count=24 conv=notrunc status=none
start_nasd "$T"
$PAT verify "$URL" 1 64 >/dev/null || fail "data wrong after corrupting a member"
expect 202 POST pools/tank/scrub
wait_background
[ "$(api GET pools/tank | jq -r '.repaired')" -gt 0 ] || fail "nothing repaired: $BODY"
[ "$(api GET pools/tank | jq -r '.members[1].checksum_errors')" -gt 0 ] || fail "no checksum errors counted on d1: $BODY"
# 24 MiB of garbage is far past the checksum error limit: d1 is FAULTED; clear resilvers it
[ "$(api GET pools/tank | jq -r '.members[1].state')" = FAULTED ] || fail "d1 not FAULTED after 24 MiB of garbage"
expect 200 POST pools/tank/clear
wait_background
[ "$(pool_state)" = ONLINE ] || fail "not ONLINE after clear"
[ "$(api GET pools/tank | jq -r '.members[1].checksum_errors')" = 0 ] || fail "counters not cleared"
$PAT verify "$URL" 1 64 >/dev/null || fail "data wrong after clear + resilver"
expect 400 POST pools/tank/offline '{"member":9}'

# 2. offline member: DEGRADED, still read/write, online resilvers
expect 200 POST pools/tank/offline '{"member":2}'
[ "$(pool_state)" = DEGRADED ] || fail "not DEGRADED after offline"
expect 409 POST pools/tank/offline '{"member":3}'   # would lose data in raidz1
$PAT write "$URL" 2 64 >/dev/null || fail "write while degraded"
expect 200 POST pools/tank/online '{"member":2}'
wait_background
[ "$(pool_state)" = ONLINE ] || fail "not ONLINE after online+resilver"
rows=$(api GET pools/tank | jq -r .resilver.rows)
[ "$rows" -gt 0 ] 2>/dev/null || fail "resilver rows: $rows"
# the resilvered member alone now holds its column: another member offline, read it all
expect 200 POST pools/tank/offline '{"member":0}'
$PAT verify "$URL" 2 64 >/dev/null || fail "data wrong after resilver"
expect 200 POST pools/tank/online '{"member":0}'
wait_background

# 3. a member disappears: import is DEGRADED, replace onto a new file resilvers to ONLINE
stop_nasd
rm -f "$T/d3.img"
start_nasd "$T"
[ "$(pool_state)" = DEGRADED ] || fail "not DEGRADED with a missing member: $(api GET pools/tank)"
$PAT verify "$URL" 2 64 >/dev/null || fail "data wrong with a missing member"
expect 200 POST pools/tank/replace "{\"member\":3,\"path\":\"$T/d3new.img\",\"size\":\"256M\",\"create\":true}"
wait_background
[ "$(pool_state)" = ONLINE ] || fail "not ONLINE after replace"
[ "$(api GET pools/tank | jq -r '.members[3].path')" = "$T/d3new.img" ] || fail "replaced path not shown"
$PAT verify "$URL" 2 64 >/dev/null || fail "data wrong after replace"

# 4. kill -9 during FUA writes: every acknowledged block is intact, the pool imports ONLINE
$PAT write "$URL" 3 96 > "$T/acked" 2>/dev/null & WPID=$!
for _ in $(seq 200); do   # kill once a few MiB are acknowledged, well before the end
  [ "$(tail -1 "$T/acked" 2>/dev/null | awk '{print $2}')" -ge 1024 ] 2>/dev/null && break
  sleep 0.02
done
kill -9 $NASD_PID; wait $NASD_PID 2>/dev/null; NASD_PID=
sleep 0.5; kill $WPID 2>/dev/null; wait $WPID 2>/dev/null; WPID=
acked=$(tail -1 "$T/acked" | awk '{print $2}')
[ -n "$acked" ] && [ "$acked" -gt 0 ] || fail "writer acknowledged nothing before the kill"
start_nasd "$T"
[ "$(pool_state)" = ONLINE ] || fail "pool not ONLINE after kill -9"
$PAT verify "$URL" 3 "${acked}b" >/dev/null || fail "acknowledged writes lost after kill -9 ($acked blocks)"
echo "kill -9: $acked acknowledged blocks intact"

# 5. import from the member disks alone into a fresh database
stop_nasd
mv "$T/nasd.db" "$T/old.db"; rm -f "$T/nasd.db-wal" "$T/nasd.db-shm"
start_nasd "$T"
expect 201 POST pools/tank2/import "{\"members\":[\"$T/d3new.img\",\"$T/d1.img\",\"$T/d0.img\",\"$T/d2.img\"]}"
[ "$(jget "$BODY" .layout)" = "$LAYOUT" ] || fail "imported layout: $BODY"
[ "$(jget "$BODY" .members[0].path)" = "$T/d0.img" ] || fail "members not in label order: $BODY"
expect 200 GET volumes/tank2/vol1
expect 201 POST exports/iscsi '{"name":"t2","volume":"tank2/vol1"}'
$PAT verify "iscsi://127.0.0.1:$ISCSI_PORT/iqn.2026-12.io.nasd:t2/0" 3 "${acked}b" >/dev/null || fail "data wrong after import"
expect 409 POST pools/tank3/import "{\"members\":[\"$T/d0.img\"]}"
[ "$(api GET pools/tank2 | jq -r .layout)" = "$LAYOUT" ] || fail "layout after import: $BODY"
if [ "$LAYOUT" = raidz1 ]; then   # 17 TiB of data: past its 4-byte locations, a clear 400
  expect 400 POST pools "{\"name\":\"huge\",\"layout\":\"raidz1\",\"members\":[
    {\"path\":\"$T/h0.img\",\"size\":\"8704G\",\"create\":true},{\"path\":\"$T/h1.img\",\"size\":\"8704G\",\"create\":true},
    {\"path\":\"$T/h2.img\",\"size\":\"8704G\",\"create\":true}]}"
  grep -q "at most 16 TiB" <<<"$BODY" || fail "huge raidz1: $BODY"
  used=$(du -ck "$T"/h?.img 2>/dev/null | tail -1 | cut -f1)   # created sparse, or removed
  [ "${used:-0}" -lt 1024 ] || fail "huge raidz1 wrote ${used} KiB to its members"
fi
echo "pool engine ($LAYOUT): ok"
