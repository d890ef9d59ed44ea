#!/bin/bash
# Snapshots on a ceph pool through the same REST resources as local pools, done with RBD:
# a volume snapshot (pattern A kept while B is written) as a read-only LUN with its own
# serial, a clone that diverges, a forced rollback; a dataset snapshot taken at a
# filesystem commit point, exported read-only over NFS, rolled back; a dataset quota and a
# file handle across a restart, as for local datasets. Then the cluster stops
# under the daemon: the pool says so, nasd keeps answering.
set -u
. "$(dirname "$0")/lib.sh"
. "$ROOT/tests/ceph/lib.sh"
T=$(mktemp -d /tmp/nasd-it-ceph-snap.XXXXXX)
trap 'stop_nasd; ceph_down; rm -rf "$T"' EXIT
ceph_up "$T"
mkdir -p "$T/gw"
start_nasd "$T/gw"
PAT=$ROOT/build/tools/iscsi_pattern
IQN=iqn.2026-12.io.nasd
serial() { iscsi-inq -e 1 -c 128 "$1" | sed -n 's/^Unit Serial Number:\[\(.*\)\]/\1/p'; }
expect 201 POST pools "$(ceph_pool_json cp)"
expect 201 POST volumes '{"pool":"cp","name":"v1","size":"32M"}'
expect 201 POST exports/iscsi '{"name":"t1","volume":"cp/v1"}'
URL=iscsi://127.0.0.1:$ISCSI_PORT/$IQN:t1/0

$PAT write "$URL" 1 8 >/dev/null || fail "write A"
expect 201 POST volumes/cp/v1/snapshots '{"name":"s1"}'
rbd snap ls rbd/v1 | grep -qw s1 || fail "no RBD snapshot v1@s1"
expect 409 POST volumes/cp/v1/snapshots '{"name":"s1"}'
$PAT write "$URL" 2 8 >/dev/null || fail "write B"
expect 200 GET volumes/cp/v1/snapshots/s1
[ "$(jget "$BODY" .size)" = $((32 << 20)) ] || fail "snapshot size: $BODY"
expect 201 POST exports/iscsi '{"name":"s1ro","luns":[{"lun":0,"volume":"cp/v1","snapshot":"s1"}]}'
SURL=iscsi://127.0.0.1:$ISCSI_PORT/$IQN:s1ro/0
$PAT verify "$SURL" 1 8 >/dev/null || fail "snapshot LUN does not read A"
$PAT write "$SURL" 9 1 >/dev/null 2>&1 && fail "write to a snapshot LUN succeeded"
[ "$(serial "$SURL")" != "$(serial "$URL")" ] || fail "the snapshot LUN has the volume's serial"

expect 201 POST volumes/cp/v1/snapshots/s1/clone '{"name":"c1"}'
expect 200 GET volumes/cp/c1
expect 201 POST exports/iscsi '{"name":"tc","volume":"cp/c1"}'
CURL=iscsi://127.0.0.1:$ISCSI_PORT/$IQN:tc/0
$PAT verify "$CURL" 1 8 >/dev/null || fail "fresh clone is not A"
$PAT write "$CURL" 3 4 >/dev/null || fail "write to the clone"
$PAT verify "$URL" 2 8 >/dev/null || fail "volume changed by clone writes"
expect 204 DELETE exports/iscsi/s1ro
api DELETE volumes/cp/v1/snapshots/s1 >/dev/null
[ "$STATUS" = 409 ] || fail "deleting a snapshot a clone depends on -> $STATUS $BODY"

expect 409 POST volumes/cp/v1/snapshots/s1/rollback '{}'
expect 200 POST volumes/cp/v1/snapshots/s1/rollback '{"force":true}'
$PAT verify "$URL" 1 8 >/dev/null || fail "volume is not A after the rollback"
$PAT verify "$CURL" 3 4 >/dev/null || fail "clone changed by the rollback"
expect 204 DELETE exports/iscsi/tc
expect 204 DELETE volumes/cp/c1
expect 204 DELETE volumes/cp/v1/snapshots/s1
rbd snap ls rbd/v1 | grep -qw s1 && fail "RBD snapshot left after DELETE"

# dataset snapshots
expect 201 POST datasets '{"pool":"cp","name":"ds","mode":"0777"}'
expect 201 POST exports/nfs '{"dataset":"cp/ds","clients":["127.0.0.0/8"],"root_squash":false}'
ARGS="?nfsport=$NFS_PORT&mountport=$MOUNT_PORT"
L="nfs://127.0.0.1/cp/ds"
sum() { sha256sum | cut -c1-64; }
head -c 1000000 /dev/urandom > "$T/A"
head -c 500000 /dev/urandom > "$T/B"
nfs-cp "$T/A" "$L/a$ARGS" >/dev/null || fail "nfs-cp A"
expect 201 POST datasets/cp/ds/snapshots '{"name":"d1"}'
nfs-cp "$T/B" "$L/b$ARGS" >/dev/null || fail "nfs-cp B"
expect 201 POST exports/nfs '{"dataset":"cp/ds","snapshot":"d1","clients":["127.0.0.0/8"],"root_squash":false}'
S="nfs://127.0.0.1$(jget "$BODY" .path)"
[ "$(nfs-cat "$S/a$ARGS" | sum)" = "$(sum < "$T/A")" ] || fail "dataset snapshot: a is not A"
nfs-cat "$S/b$ARGS" >/dev/null 2>&1 && fail "b (written after the snapshot) is in it"
expect 200 POST datasets/cp/ds/snapshots/d1/rollback '{"force":true}'
[ "$(nfs-cat "$L/a$ARGS" | sum)" = "$(sum < "$T/A")" ] || fail "a after the dataset rollback"
nfs-cat "$L/b$ARGS" >/dev/null 2>&1 && fail "b still there after the rollback"
# the NFS tests local datasets pass: quota, and a file handle kept across a daemon restart
CT=$ROOT/build/tools/nfs_client_test
expect 201 POST datasets '{"pool":"cp","name":"q","quota":"8M","mode":"0777"}'
expect 201 POST exports/nfs '{"dataset":"cp/q","clients":["127.0.0.0/8"],"root_squash":false}'
Q="nfs://127.0.0.1/cp/q$ARGS"
timeout 60 "$CT" "$Q" quota $((8 << 20)) >/dev/null || fail "quota on a ceph dataset"
timeout 20 "$CT" "$Q" save-handle "$T/fh" >/dev/null || fail "save handle"
stop_nasd
start_nasd "$T/gw"
ARGS="?nfsport=$NFS_PORT&mountport=$MOUNT_PORT"
timeout 20 "$CT" "nfs://127.0.0.1/cp/q$ARGS" check-handle "$T/fh" >/dev/null || fail "handle from before the restart"

# the cluster goes away: the pool reports it within the client timeouts, nasd keeps answering
ceph_down; CEPH_DIR=
t0=$SECONDS
expect 200 GET pools/cp
[ "$(jget "$BODY" .state)" != ONLINE ] || fail "pool ONLINE with the cluster stopped: $BODY"
echo "  cluster stopped: pool $(jget "$BODY" .state) after $((SECONDS - t0)) s ($(jget "$BODY" .error))"
[ $((SECONDS - t0)) -le 30 ] || fail "GET pools took $((SECONDS - t0)) s with the cluster down"
kill -0 $NASD_PID || fail "nasd died with the cluster"
echo "ceph snapshots: ok"
