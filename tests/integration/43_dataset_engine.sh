#!/bin/bash
# Datasets live on the pool engine: NFS data takes space from the pool (and gives it
# back on delete) but never the space thick volumes were promised, lz4 datasets keep
# compressible data in less disk space, data the
# server acknowledged survives kill -9, a corrupted member is repaired under the
# filesystem, and importing the pool's disks into a fresh database brings the
# datasets back with their files.
set -u
LAYOUT=${LAYOUT:-raidz1-inplace}   # 21_pool_log.sh runs it on raidz1 (log-structured)
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-ds.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
mkdir -p "$T/a" "$T/b"
start_nasd "$T/a"
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"$LAYOUT\",\"members\":[
  {\"path\":\"$T/d0.img\",\"size\":\"128M\",\"create\":true},{\"path\":\"$T/d1.img\",\"size\":\"128M\",\"create\":true},
  {\"path\":\"$T/d2.img\",\"size\":\"128M\",\"create\":true}]}"
pool_alloc() { api GET pools/tank >/dev/null; jget "$BODY" .allocated; }
ds_alloc() { api GET "datasets/tank/$1" >/dev/null; jget "$BODY" .allocated; }
A0=$(pool_alloc)
expect 201 POST datasets '{"pool":"tank","name":"plain","mode":"0777"}'
expect 201 POST datasets '{"pool":"tank","name":"packed","compression":"lz4","mode":"0777"}'
[ "$(jget "$BODY" .compression)" = lz4 ] || fail "compression not recorded: $BODY"
[ "$(jget "$BODY" .path)" = tank/packed ] || fail "dataset path: $BODY"
A1=$(pool_alloc)
[ $((A1 - A0)) -lt $((16 << 20)) ] || fail "an empty dataset took $((A1 - A0)) bytes of the pool"
expect 400 POST datasets "{\"pool\":\"tank\",\"name\":\"$(printf 'x%.0s' $(seq 63))\"}"
expect 409 PATCH datasets/tank/packed '{"compression":"off"}'
expect 201 POST exports/nfs '{"dataset":"tank/plain","clients":["127.0.0.0/8"],"root_squash":false}'
expect 201 POST exports/nfs '{"dataset":"tank/packed","clients":["127.0.0.0/8"],"root_squash":false}'
ARGS="?nfsport=$NFS_PORT&mountport=$MOUNT_PORT"
P="nfs://127.0.0.1/tank/plain"
Z="nfs://127.0.0.1/tank/packed"

# space comes from the pool; compressible text takes far less disk in the lz4 dataset
# (lz4 leaves holes in the member files; the pool still maps whole allocation units)
disk() { echo $(( $(stat -c '%b*%B' "$T/d0.img") + $(stat -c '%b*%B' "$T/d1.img") + $(stat -c '%b*%B' "$T/d2.img") )); }
head -c 6000000 /dev/urandom > "$T/blob"
yes "nasd keeps datasets on its pool engine" | head -c 16000000 > "$T/text"
nfs-cp "$T/blob" "$P/blob$ARGS" >/dev/null || fail "nfs-cp blob"
D0=$(disk)
nfs-cp "$T/text" "$P/text$ARGS" >/dev/null || fail "nfs-cp text (plain)"
D1=$(disk)
nfs-cp "$T/text" "$Z/text$ARGS" >/dev/null || fail "nfs-cp text (packed)"
D2=$(disk)
[ $((D2 - D1)) -lt $(((D1 - D0) / 3)) ] || fail "16 MB of text took $((D2 - D1)) disk bytes with lz4, $((D1 - D0)) without"
A2=$(pool_alloc)
[ $((A2 - A1)) -ge $((20 << 20)) ] || fail "pool allocation grew only $((A2 - A1)) bytes for 22 MB in plain"
[ "$(ds_alloc plain)" -ge 22000000 ] || fail "dataset allocation: $BODY"
[ "$(nfs-cat "$Z/text$ARGS" | sha256sum)" = "$(sha256sum < "$T/text")" ] || fail "lz4 text differs"

# a thick volume's promised space is not for datasets: a full pool refuses NFS writes
# cleanly (NOSPC), and the dataset works again once the volume is gone
api GET pools/tank >/dev/null; SIZE=$(jget "$BODY" .size)
HOG=$(( (SIZE - $(ds_alloc plain) - $(ds_alloc packed) - (8 << 20)) / 1048576 * 1048576 ))
expect 201 POST volumes "{\"pool\":\"tank\",\"name\":\"hog\",\"size\":$HOG}"
head -c 6000000 /dev/urandom > "$T/blob2"
nfs-cp "$T/blob2" "$P/blob2$ARGS" >/dev/null 2>&1 && fail "NFS write into space a volume was promised"
grep -E "txb .*(failed|refused)|commit failed" "$T/a/nasd.log" && fail "the full pool broke a dataset commit"
[ "$(nfs-cat "$P/blob$ARGS" | sha256sum)" = "$(sha256sum < "$T/blob")" ] || fail "blob differs after NOSPC"
expect 204 DELETE volumes/tank/hog
timeout 20 "$ROOT/build/tools/nfs_client_test" "$P$ARGS" rm /blob2 >/dev/null || fail "remove the partial blob2"
nfs-cp "$T/blob2" "$P/blob2$ARGS" >/dev/null || fail "NFS write after the volume was deleted"
[ "$(nfs-cat "$P/blob2$ARGS" | sha256sum)" = "$(sha256sum < "$T/blob2")" ] || fail "blob2 differs"

# kill -9: everything nfs-cp wrote (FILE_SYNC / COMMIT) is intact after the restart
kill -KILL $NASD_PID; wait $NASD_PID 2>/dev/null; NASD_PID=
start_nasd "$T/a"
[ "$(nfs-cat "$P/blob$ARGS" | sha256sum)" = "$(sha256sum < "$T/blob")" ] || fail "blob differs after kill -9"
[ "$(nfs-cat "$Z/text$ARGS" | sha256sum)" = "$(sha256sum < "$T/text")" ] || fail "text differs after kill -9"

# a damaged member: the engine repairs under the filesystem, files read back intact
stop_nasd
dd if=/dev/urandom of="$T/d1.img" bs=1M count=112 seek=8 conv=notrunc status=none  # past labels, journal, metadata
start_nasd "$T/a"
[ "$(nfs-cat "$P/blob$ARGS" | sha256sum)" = "$(sha256sum < "$T/blob")" ] || fail "blob differs with a damaged member"
[ "$(nfs-cat "$P/text$ARGS" | sha256sum)" = "$(sha256sum < "$T/text")" ] || fail "text differs with a damaged member"
expect 202 POST pools/tank/scrub
for _ in $(seq 300); do api GET pools/tank >/dev/null; [ "$(jget "$BODY" .scrub.running)" = false ] && break; sleep 0.2; done
[ "$(jget "$BODY" .repaired)" -gt 0 ] || fail "nothing repaired: $BODY"
[ "$(jget "$BODY" .scrub.unrepairable)" = 0 ] || fail "scrub found unrepairable blocks: $BODY"

# deleting files gives the space back to the pool
A2=$(pool_alloc)
timeout 20 "$ROOT/build/tools/nfs_client_test" "$P$ARGS" rm /text >/dev/null || fail "remove text over NFS"
sleep 2
A3=$(pool_alloc)
[ "$A3" -lt $((A2 - (10 << 20))) ] || fail "pool allocation did not drop after delete: $A2 -> $A3"

# the pool's disks alone bring the datasets back in a fresh database
stop_nasd
unset HTTP_PORT ISCSI_PORT NFS_PORT MOUNT_PORT
start_nasd "$T/b"
expect 201 POST pools/tank/import "{\"members\":[\"$T/d0.img\",\"$T/d1.img\",\"$T/d2.img\"]}"
api GET datasets >/dev/null
[ "$(jget "$BODY" '[.[] | .name] | sort | join(",")')" = "packed,plain" ] || fail "imported datasets: $BODY"
api GET datasets/tank/packed >/dev/null
[ "$(jget "$BODY" .compression)" = lz4 ] || fail "imported compression: $BODY"
expect 201 POST exports/nfs '{"dataset":"tank/plain","clients":["127.0.0.0/8"],"root_squash":false}'
ARGS="?nfsport=$NFS_PORT&mountport=$MOUNT_PORT"
[ "$(nfs-cat "$P/blob$ARGS" | sha256sum)" = "$(sha256sum < "$T/blob")" ] || fail "blob differs after import"
expect 409 DELETE datasets/tank/plain
expect 204 DELETE exports/nfs/tank_plain
expect 204 DELETE datasets/tank/plain
expect 204 DELETE datasets/tank/packed
echo "datasets on the pool engine: ok"
