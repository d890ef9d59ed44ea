#!/bin/bash
# The NFS service inside nasd, configured over REST: the libnfs test program and the
# nfs-* tools against an exported dataset, quota from the dataset, client networks and
# read-only changed live with PATCH, and a file handle that survives a daemon restart.
set -u
. "$(dirname "$0")/lib.sh"
CT=$ROOT/build/tools/nfs_client_test
T=$(mktemp -d /tmp/nasd-it-nfs.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
start_nasd "$T"
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"mirror\",\"members\":[
  {\"path\":\"$T/d0.img\",\"size\":\"128M\",\"create\":true},{\"path\":\"$T/d1.img\",\"size\":\"128M\",\"create\":true}]}"
expect 201 POST datasets '{"pool":"tank","name":"share","quota":"8M","mode":"0777"}'
expect 201 POST exports/nfs '{"dataset":"tank/share","clients":["127.0.0.0/8"],"root_squash":false}'
URL="nfs://127.0.0.1/tank/share"
ARGS="?nfsport=$NFS_PORT&mountport=$MOUNT_PORT"

timeout 120 "$CT" "$URL$ARGS" basic >/dev/null || fail "libnfs test program against nasd"
head -c 3000000 /dev/urandom > "$T/blob"
nfs-cp "$T/blob" "$URL/blob$ARGS" >/dev/null || fail "nfs-cp upload"
[ "$(nfs-cat "$URL/blob$ARGS" | sha256sum)" = "$(sha256sum < "$T/blob")" ] || fail "nfs-cat content differs"
nfs-ls "$URL$ARGS" | grep -q blob || fail "nfs-ls does not list blob"
[ "$(api GET datasets/tank/share | jq -r .allocated)" -ge 3000000 ] || fail "dataset blocks not in the pool: $BODY"
timeout 60 "$CT" "$URL$ARGS" quota $((8 << 20)) >/dev/null || fail "dataset quota not enforced"
[ "$(api GET datasets/tank/share | jq -r .used)" -ge 3000000 ] || fail "dataset usage not shown: $BODY"

timeout 20 "$CT" "$URL$ARGS" save-handle "$T/fh" >/dev/null || fail "save handle"
stop_nasd
start_nasd "$T"
timeout 20 "$CT" "$URL$ARGS" check-handle "$T/fh" >/dev/null || fail "handle from before the restart"

echo "hello over nfs" > "$T/hello.txt"
nfs-cp "$T/hello.txt" "$URL/hello.txt$ARGS" >/dev/null || fail "nfs-cp hello.txt"
expect 200 PATCH exports/nfs/tank_share '{"read_only":true}'
timeout 30 "$CT" "$URL$ARGS" ro >/dev/null || fail "read-only export accepted writes"
expect 200 PATCH exports/nfs/tank_share '{"clients":["10.0.0.0/8"],"read_only":false}'
timeout 20 "$CT" "$URL$ARGS" mount-fail >/dev/null || fail "mount from a denied network succeeded"
expect 200 PATCH exports/nfs/tank_share '{"enabled":false}'
timeout 20 "$CT" "$URL$ARGS" mount-fail >/dev/null || fail "disabled export still mountable"
expect 204 DELETE exports/nfs/tank_share
echo "nfs via nasd: ok"
