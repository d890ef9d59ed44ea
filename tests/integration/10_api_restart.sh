#!/bin/bash
# Provision pool -> dataset -> volume -> iSCSI + NFS exports over REST, check HTTP-level
# errors, restart nasd (clean and kill -9) and see the same configuration served again.
set -u
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-api.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
start_nasd "$T"

expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"raidz1\",\"members\":[
  {\"path\":\"$T/d0.img\",\"size\":\"256M\",\"create\":true},{\"path\":\"$T/d1.img\",\"size\":\"256M\",\"create\":true},
  {\"path\":\"$T/d2.img\",\"size\":\"256M\",\"create\":true}]}"
[ "$(jget "$BODY" .state)" = ONLINE ] || fail "pool not ONLINE: $BODY"
[ "$(stat -c %s "$T/d0.img")" = 268435456 ] || fail "member not created with its size"
expect 201 POST datasets '{"pool":"tank","name":"share","quota":"100M"}'
expect 201 POST volumes '{"pool":"tank","name":"vol1","size":"64M"}'
expect 201 POST exports/iscsi '{"name":"t1","volume":"tank/vol1","initiators":["iqn.2026-12.test:client"]}'
[ "$(jget "$BODY" .active)" = true ] || fail "iSCSI export not active: $BODY"
expect 201 POST exports/nfs '{"dataset":"tank/share","clients":["127.0.0.0/8"],"read_only":true}'
[ "$(jget "$BODY" .path)" = /tank/share ] || fail "default NFS path: $BODY"

# HTTP-level errors
out=$(curl -s -w '%{http_code}' -X POST -H 'Content-Type: text/plain' --data 'x' "$API/pools"); [[ $out == *415 ]] || fail "415: $out"
out=$(curl -s -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data '{"name":' "$API/pools"); [[ $out == *400 ]] || fail "400 malformed: $out"
head -c 1200000 /dev/zero | tr '\0' ' ' > "$T/big.json"
out=$(curl -s -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary @"$T/big.json" "$API/pools"); [[ $out == *413 ]] || fail "413: $out"
expect 409 POST exports/iscsi '{"name":"t1","volume":"tank/vol1"}'
expect 409 DELETE volumes/tank/vol1
expect 409 DELETE datasets/tank/share
expect 404 GET exports/nfs/nope
expect 405 PUT pools/tank
out=$(curl -s -w '%{http_code}' "http://127.0.0.1:$HTTP_PORT/../etc/passwd"); [[ $out != *root:* ]] || fail "path traversal"

snapshot() {
  for r in pools datasets volumes exports/iscsi exports/nfs; do
    api GET $r | jq -c 'map(del(.used, .allocated, .free))'
  done
}
before=$(snapshot)
stop_nasd
start_nasd "$T"
[ "$(snapshot)" = "$before" ] || fail "config differs after restart"
[ "$(api GET exports/iscsi/t1 | jq -r .active)" = true ] || fail "iSCSI export not restored"
[ "$(api GET exports/nfs/tank_share | jq -r .active)" = true ] || fail "NFS export not restored"

# kill -9 right after a change: the change is durable (SQLite WAL, synchronous=FULL)
expect 200 PATCH exports/nfs/tank_share '{"read_only":false}'
kill -9 $NASD_PID; wait $NASD_PID 2>/dev/null; NASD_PID=
start_nasd "$T"
[ "$(api GET exports/nfs/tank_share | jq -r .read_only)" = false ] || fail "PATCH lost after kill -9"
[ "$(api GET exports/iscsi/t1 | jq -r .active)" = true ] || fail "iSCSI export not restored after kill -9"

# the exports are live on their protocols, with the initiator ACL applied
TURL=iscsi://127.0.0.1:$ISCSI_PORT/iqn.2026-12.io.nasd:t1/0
NURL="nfs://127.0.0.1/tank/share?nfsport=$NFS_PORT&mountport=$MOUNT_PORT"
iscsi-inq -i iqn.2026-12.test:client "$TURL" >/dev/null 2>&1 || fail "iSCSI export not served"
iscsi-inq -i iqn.2026-12.test:intruder "$TURL" >/dev/null 2>&1 && fail "initiator ACL not applied"
nfs-ls "$NURL" >/dev/null 2>&1 || fail "NFS export not served"

# teardown order is enforced, then everything goes; deleted exports vanish from the wire
expect 409 DELETE pools/tank
expect 204 DELETE exports/iscsi/t1
iscsi-inq -i iqn.2026-12.test:client "$TURL" >/dev/null 2>&1 && fail "deleted iSCSI export still served"
expect 204 DELETE exports/nfs/tank_share
nfs-ls "$NURL" >/dev/null 2>&1 && fail "deleted NFS export still served"
expect 204 DELETE volumes/tank/vol1
expect 204 DELETE datasets/tank/share
expect 204 DELETE pools/tank
[ "$(api GET system | jq -r '.counts | add')" = 0 ] || fail "objects left: $BODY"
echo "api/restart: ok"
