#!/bin/bash
# Volume snapshots through the daemon: pattern A, snapshot, pattern B; the snapshot
# (a read-only iSCSI LUN) reads A, the volume B; rollback (refused while exported
# unless forced) gives A back; a clone diverges independently; deleting frees the space
# only the snapshot held; snapshots survive an import into a fresh database.
set -u
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-snap.XXXXXX)
PAT=$ROOT/build/tools/iscsi_pattern
trap 'stop_nasd; rm -rf "$T"' EXIT
start_nasd "$T"
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"${LAYOUT:-raidz1-inplace}\",\"members\":[
  {\"path\":\"$T/d0.img\",\"size\":\"128M\",\"create\":true},{\"path\":\"$T/d1.img\",\"size\":\"128M\",\"create\":true},
  {\"path\":\"$T/d2.img\",\"size\":\"128M\",\"create\":true}]}"
[ "$(api GET pools/tank | jq -r .layout)" = "${LAYOUT:-raidz1-inplace}" ] || fail "layout of tank"
expect 201 POST volumes '{"pool":"tank","name":"v1","size":"32M"}'
expect 201 POST exports/iscsi '{"name":"t1","volume":"tank/v1"}'
IQN=iqn.2026-12.io.nasd
URL=iscsi://127.0.0.1:$ISCSI_PORT/$IQN:t1/0
alloc() { api GET pools/tank | jq -r .allocated; }

$PAT write "$URL" 1 16 >/dev/null || fail "write A"
a0=$(alloc)
expect 201 POST volumes/tank/v1/snapshots '{"name":"s1"}'
[ "$(jget "$BODY" .name)" = s1 ] && [ "$(jget "$BODY" .referenced)" -eq $((16 << 20)) ] || fail "snapshot: $BODY"
expect 409 POST volumes/tank/v1/snapshots '{"name":"s1"}'
expect 400 POST volumes/tank/v1/snapshots '{"name":"../x"}'
expect 404 POST volumes/tank/nope/snapshots '{"name":"s"}'
# an escaped NUL or slash in the path names no snapshot: it must not reach s1
expect 400 DELETE 'volumes/tank/v1/snapshots/s1%00xyz'
expect 400 GET 'volumes/tank/v1/snapshots/s1%2Fsend'
expect 404 GET 'volumes/tank/v1/snapshots/s1/send?from=s1%00zz'
expect 404 GET 'volumes/tank/v1/snapshots/s1/send?from=%ff'
[ "$(jget "$BODY" .error.code)" = not_found ] || fail "error without a JSON body: $BODY"
expect 200 GET volumes/tank/v1/snapshots/s1
[ "$(alloc)" = "$a0" ] || fail "snapshot copied data: $a0 -> $(alloc)"
$PAT write "$URL" 2 16 >/dev/null || fail "write B"
$PAT verify "$URL" 2 16 >/dev/null || fail "volume is not B"
expect 200 GET volumes/tank/v1/snapshots/s1
[ "$(jget "$BODY" .used)" -eq $((16 << 20)) ] || fail "s1 used after overwriting all: $BODY"

# the snapshot as a read-only LUN: reads A, refuses writes
expect 201 POST exports/iscsi "{\"name\":\"s1ro\",\"luns\":[{\"lun\":0,\"volume\":\"tank/v1\",\"snapshot\":\"s1\"}]}"
[ "$(jget "$BODY" .luns[0].snapshot)" = s1 ] || fail "lun snapshot not shown: $BODY"
SURL=iscsi://127.0.0.1:$ISCSI_PORT/$IQN:s1ro/0
$PAT verify "$SURL" 1 16 >/dev/null || fail "snapshot LUN does not read A"
$PAT write "$SURL" 9 1 >/dev/null 2>&1 && fail "write to a snapshot LUN succeeded"
$PAT verify "$SURL" 1 16 >/dev/null || fail "snapshot changed by a refused write"
expect 404 POST exports/iscsi "{\"name\":\"bad\",\"luns\":[{\"lun\":0,\"volume\":\"tank/v1\",\"snapshot\":\"nope\"}]}"

# clone: starts as A, diverges on its own
expect 201 POST volumes/tank/v1/snapshots/s1/clone '{"name":"c1"}'
expect 200 GET volumes/tank/c1
expect 201 POST exports/iscsi '{"name":"tc","volume":"tank/c1"}'
CURL=iscsi://127.0.0.1:$ISCSI_PORT/$IQN:tc/0
$PAT verify "$CURL" 1 16 >/dev/null || fail "fresh clone is not A"
$PAT write "$CURL" 3 4 >/dev/null || fail "write to clone"
$PAT verify "$CURL" 3 4 >/dev/null || fail "clone is not C"
$PAT verify "$URL" 2 16 >/dev/null || fail "volume changed by clone writes"
$PAT verify "$SURL" 1 16 >/dev/null || fail "snapshot changed by clone writes"
expect 409 DELETE volumes/tank/v1/snapshots/s1      # exported
expect 204 DELETE exports/iscsi/s1ro
expect 409 DELETE volumes/tank/v1/snapshots/s1      # the clone depends on it
expect 409 DELETE volumes/tank/v1                   # exported (and a clone depends on it)

# rollback: refused while exported, forced gives A back and frees B's units
expect 409 POST volumes/tank/v1/snapshots/s1/rollback '{}'
a1=$(alloc)
expect 200 POST volumes/tank/v1/snapshots/s1/rollback '{"force":true}'
$PAT verify "$URL" 1 16 >/dev/null || fail "volume is not A after rollback"
[ "$(alloc)" -eq $((a1 - (16 << 20))) ] || fail "rollback did not free B: $a1 -> $(alloc)"
$PAT verify "$CURL" 3 4 >/dev/null || fail "clone changed by the rollback"

# delete frees what only the snapshot held
$PAT write "$URL" 4 16 >/dev/null || fail "write D"
expect 204 DELETE exports/iscsi/tc
expect 204 DELETE volumes/tank/c1
a2=$(alloc)
expect 204 DELETE volumes/tank/v1/snapshots/s1
[ "$(alloc)" -eq $((a2 - (16 << 20))) ] || fail "delete freed $(( (a2 - $(alloc)) >> 20 )) MiB, want 16"
expect 404 GET volumes/tank/v1/snapshots/s1
$PAT verify "$URL" 4 16 >/dev/null || fail "volume damaged by the delete"

# resilver with snapshots: copies made while a member is offline reach it; then the
# snapshot reads right with another member offline (rebuilt from the resilvered one)
expect 201 POST volumes/tank/v1/snapshots '{"name":"keep"}'
expect 200 POST pools/tank/offline '{"member":1}'
$PAT write "$URL" 5 8 >/dev/null || fail "write while degraded"
expect 200 POST pools/tank/online '{"member":1}'
for _ in $(seq 100); do [ "$(api GET pools/tank/scrub | jq -r .resilver.running)" = false ] && break; sleep 0.1; done
expect 200 POST pools/tank/offline '{"member":2}'
expect 201 POST exports/iscsi "{\"name\":\"kr\",\"luns\":[{\"lun\":0,\"volume\":\"tank/v1\",\"snapshot\":\"keep\"}]}"
$PAT verify "iscsi://127.0.0.1:$ISCSI_PORT/$IQN:kr/0" 4 16 >/dev/null || fail "snapshot after resilver, member 2 offline"
$PAT verify "$URL" 5 8 >/dev/null || fail "volume after resilver, member 2 offline"
expect 204 DELETE exports/iscsi/kr
expect 200 POST pools/tank/online '{"member":2}'
for _ in $(seq 100); do [ "$(api GET pools/tank/scrub | jq -r .resilver.running)" = false ] && break; sleep 0.1; done
expect 202 POST pools/tank/scrub
for _ in $(seq 100); do [ "$(api GET pools/tank/scrub | jq -r .scrub.running)" = false ] && break; sleep 0.1; done
[ "$(api GET pools/tank | jq -r .unrepairable)" = 0 ] || fail "scrub with snapshots: $BODY"

# snapshots live in the pool: an import into a fresh database lists them
stop_nasd
mv "$T/nasd.db" "$T/old.db"; rm -f "$T/nasd.db-wal" "$T/nasd.db-shm"
start_nasd "$T"
expect 201 POST pools/tank/import "{\"members\":[\"$T/d0.img\",\"$T/d1.img\",\"$T/d2.img\"]}"
expect 200 GET volumes/tank/v1/snapshots
[ "$(jget "$BODY" '.[0].name')" = keep ] || fail "snapshot list after import: $BODY"
expect 201 POST exports/iscsi "{\"name\":\"k\",\"luns\":[{\"lun\":0,\"volume\":\"tank/v1\",\"snapshot\":\"keep\"}]}"
$PAT verify "iscsi://127.0.0.1:$ISCSI_PORT/$IQN:k/0" 4 16 >/dev/null || fail "snapshot after import"

# a volume with snapshots goes only with ?force=true (they go with it, and its tasks)
expect 201 POST volumes '{"pool":"tank","name":"v3","size":"4M"}'
expect 201 POST volumes/tank/v3/snapshots '{"name":"a"}'
# a rollback to before a growth gives the snapshot's size back (pool and record)
expect 200 PATCH volumes/tank/v3 '{"size":"8M"}'
expect 200 POST volumes/tank/v3/snapshots/a/rollback '{}'
[ "$(jget "$BODY" .size)" = $((4 << 20)) ] || fail "snapshot info after rollback: $BODY"
[ "$(api GET volumes/tank/v3 | jq .size)" = $((4 << 20)) ] || fail "size after a rollback to before a growth: $BODY"
expect 201 POST snapshot-tasks '{"volume":"tank/v3","every":"1h","keep":2}'
expect 409 DELETE volumes/tank/v3
[ "$(jget "$BODY" .error.code)" = has_snapshots ] || fail "delete with snapshots: $BODY"
expect 200 GET volumes/tank/v3/snapshots/a
expect 204 DELETE 'volumes/tank/v3?force=true'
expect 404 GET volumes/tank/v3
[ "$(api GET snapshot-tasks | jq '[.[] | select(.name == "v3")] | length')" = 0 ] || fail "task of a deleted volume: $BODY"
echo "volume snapshots: ok"
