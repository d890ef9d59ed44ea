#!/bin/bash
# Dataset snapshots through the daemon: taken at a filesystem commit point while NFS
# writes go on, exported read-only over NFS (the snapshot's ext2 image mounted from the
# snapshot), rolled back (refused while exported unless forced), cloned into a dataset
# that diverges on its own, deleted once nothing depends on it.
set -u
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-dsnap.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
start_nasd "$T"
LAYOUT=${LAYOUT:-mirror}
M2=""   # raidz1 layouts need a third member
[ "$LAYOUT" = mirror ] || M2=",{\"path\":\"$T/d2.img\",\"size\":\"160M\",\"create\":true}"
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"$LAYOUT\",\"members\":[
  {\"path\":\"$T/d0.img\",\"size\":\"160M\",\"create\":true},{\"path\":\"$T/d1.img\",\"size\":\"160M\",\"create\":true}$M2]}"
[ "$(api GET pools/tank | jq -r .layout)" = "$LAYOUT" ] || fail "layout of tank"
expect 201 POST datasets '{"pool":"tank","name":"ds","mode":"0777"}'
expect 201 POST exports/nfs '{"dataset":"tank/ds","clients":["127.0.0.0/8"],"root_squash":false}'
ARGS="?nfsport=$NFS_PORT&mountport=$MOUNT_PORT"
L="nfs://127.0.0.1/tank/ds"
sum() { sha256sum | cut -c1-64; }
head -c 3000000 /dev/urandom > "$T/A"
head -c 2000000 /dev/urandom > "$T/B"
nfs-cp "$T/A" "$L/a$ARGS" >/dev/null || fail "nfs-cp A"
expect 201 POST datasets/tank/ds/snapshots '{"name":"s1"}'
nfs-cp "$T/B" "$L/b$ARGS" >/dev/null || fail "nfs-cp B"
[ "$(nfs-cat "$L/b$ARGS" | sum)" = "$(sum < "$T/B")" ] || fail "live b"
expect 200 GET datasets/tank/ds/snapshots
[ "$(jget "$BODY" 'length')" = 1 ] && [ "$(jget "$BODY" '.[0].name')" = s1 ] || fail "list: $BODY"

# read-only NFS export of the snapshot
expect 201 POST exports/nfs '{"dataset":"tank/ds","snapshot":"s1","clients":["127.0.0.0/8"],"root_squash":false}'
SP=$(jget "$BODY" .path)
[ "$(jget "$BODY" .read_only)" = true ] || fail "snapshot export not read-only: $BODY"
S="nfs://127.0.0.1$SP"
[ "$(nfs-cat "$S/a$ARGS" | sum)" = "$(sum < "$T/A")" ] || fail "snapshot a is not A"
nfs-cat "$S/b$ARGS" >/dev/null 2>&1 && fail "b (written after the snapshot) is in it"
nfs-cp "$T/B" "$S/c$ARGS" >/dev/null 2>&1 && fail "write into a snapshot export succeeded"
expect 409 DELETE datasets/tank/ds/snapshots/s1

# clone: has A, takes its own writes
expect 201 POST datasets/tank/ds/snapshots/s1/clone '{"name":"dc"}'
expect 201 POST exports/nfs '{"dataset":"tank/dc","clients":["127.0.0.0/8"],"root_squash":false}'
C="nfs://127.0.0.1/tank/dc"
[ "$(nfs-cat "$C/a$ARGS" | sum)" = "$(sum < "$T/A")" ] || fail "clone a is not A"
nfs-cp "$T/B" "$C/c$ARGS" >/dev/null || fail "write into the clone"
nfs-cat "$L/c$ARGS" >/dev/null 2>&1 && fail "clone write visible in the origin"

# rollback: refused while exported, forced drops b
expect 409 POST datasets/tank/ds/snapshots/s1/rollback '{}'
# a forced rollback that will be refused leaves the exports alone (clients keep writing)
applied=$(grep -c "nfs: export" "$NASD_LOG")
expect 404 POST datasets/tank/ds/snapshots/nope/rollback '{"force":true}'
expect 201 POST datasets/tank/ds/snapshots '{"name":"s1b"}'
expect 409 POST datasets/tank/ds/snapshots/s1/rollback '{"force":true}'
[ "$(jget "$BODY" .error.code)" = newer_snapshots ] || fail "refused rollback: $BODY"
expect 204 DELETE datasets/tank/ds/snapshots/s1b
[ "$(grep -c "nfs: export" "$NASD_LOG")" = "$applied" ] || fail "a refused rollback stopped the exports"
expect 200 POST datasets/tank/ds/snapshots/s1/rollback '{"force":true}'
nfs-cat "$L/b$ARGS" >/dev/null 2>&1 && fail "b survived the rollback"
[ "$(nfs-cat "$L/a$ARGS" | sum)" = "$(sum < "$T/A")" ] || fail "a after rollback"
nfs-cp "$T/B" "$L/d$ARGS" >/dev/null || fail "write after rollback"
[ "$(nfs-cat "$C/c$ARGS" | sum)" = "$(sum < "$T/B")" ] || fail "clone changed by the rollback"

# delete: only once the export and the clone are gone
api GET exports/nfs >/dev/null
for id in $(jget "$BODY" '.[] | select(.snapshot == "s1" or .dataset == "tank/dc") | .id'); do
  expect 204 DELETE exports/nfs/$id
done
expect 409 DELETE datasets/tank/ds/snapshots/s1
expect 204 DELETE datasets/tank/dc
expect 204 DELETE datasets/tank/ds/snapshots/s1
[ "$(nfs-cat "$L/d$ARGS" | sum)" = "$(sum < "$T/B")" ] || fail "live data after deleting the snapshot"
# send/receive of a dataset into another dataset; the copy is open (listed) when the
# increment arrives, which must not confuse its filesystem
expect 201 POST datasets/tank/ds/snapshots '{"name":"r1"}'
curl -sf -o "$T/full" "$API/datasets/tank/ds/snapshots/r1/send" || fail "send r1"
post_stream() {
  local out
  out=$(curl -s -w '\n%{http_code}' -X POST -H 'Content-Type: application/octet-stream' --data-binary @"$1" "$API/datasets/tank/rx/receive")
  STATUS=${out##*$'\n'}; BODY=${out%$'\n'*}
}
post_stream "$T/full"
[ "$STATUS" = 201 ] || fail "receive dataset: $STATUS $BODY"
expect 200 GET datasets   # opens rx
nfs-cp "$T/A" "$L/e$ARGS" >/dev/null || fail "nfs-cp e"
expect 201 POST datasets/tank/ds/snapshots '{"name":"r2"}'
curl -sf -o "$T/inc" "$API/datasets/tank/ds/snapshots/r2/send?from=r1" || fail "send r1..r2"
post_stream "$T/inc"
[ "$STATUS" = 201 ] || fail "receive increment: $STATUS $BODY"
expect 201 POST exports/nfs '{"dataset":"tank/rx","clients":["127.0.0.0/8"],"root_squash":false}'
X="nfs://127.0.0.1/tank/rx"
[ "$(nfs-cat "$X/d$ARGS" | sum)" = "$(sum < "$T/B")" ] || fail "received dataset: d"
[ "$(nfs-cat "$X/e$ARGS" | sum)" = "$(sum < "$T/A")" ] || fail "received dataset: e (increment)"
# a dataset with snapshots goes only with ?force=true
expect 201 POST datasets '{"pool":"tank","name":"d3"}'
expect 201 POST datasets/tank/d3/snapshots '{"name":"a"}'
expect 409 DELETE datasets/tank/d3
[ "$(jget "$BODY" .error.code)" = has_snapshots ] || fail "delete with snapshots: $BODY"
expect 204 DELETE 'datasets/tank/d3?force=true'
expect 404 GET datasets/tank/d3
echo "dataset snapshots: ok"
