#!/bin/bash
# Two nasd gateways on one ceph pool: B imports the pool from the record A keeps in the
# cluster (and later syncs what A added), both export the same RBD volume as the same LUN (same serial) and each reads
# the other's writes; the dataset (ext2 on RBD, one writer) is served by A, refused by B
# while A holds it, and taken over by B after A is killed with -9, with every file A had
# acknowledged; A's acknowledged (FUA) iSCSI writes survive kill -9 and B keeps serving.
set -u
. "$(dirname "$0")/lib.sh"
. "$ROOT/tests/ceph/lib.sh"
T=$(mktemp -d /tmp/nasd-it-ceph2.XXXXXX)
A_PID= B_PID=
trap 'kill -9 $A_PID $B_PID 2>/dev/null; wait 2>/dev/null; ceph_down; rm -rf "$T"' EXIT
ceph_up "$T"
PAT=$ROOT/build/tools/iscsi_pattern
CT=$ROOT/build/tools/nfs_client_test

# gw NAME: start a gateway with state in $T/NAME; saves its ports as NAME_API, NAME_ISCSI, ...
gw() {
  mkdir -p "$T/$1"
  unset HTTP_PORT ISCSI_PORT NFS_PORT MOUNT_PORT
  start_nasd "$T/$1"
  eval "$1_API=$API $1_ISCSI=$ISCSI_PORT $1_NFS=$NFS_PORT $1_MOUNT=$MOUNT_PORT $1_PID=$NASD_PID"
  NASD_PID=
}
use() { eval "API=\$$1_API"; }
serial() { iscsi-inq -e 1 -c 128 "$1" | sed -n 's/^Unit Serial Number:\[\(.*\)\]/\1/p'; }

gw A
use A
expect 201 POST pools "$(ceph_pool_json shared)"
expect 201 POST volumes '{"pool":"shared","name":"lun0","size":"128M"}'
expect 201 POST datasets '{"pool":"shared","name":"files","mode":"0777"}'
expect 201 POST datasets '{"pool":"shared","name":"spare"}'
expect 201 POST exports/iscsi '{"name":"mp","volume":"shared/lun0"}'
expect 201 POST exports/nfs '{"dataset":"shared/files","name":"files","clients":["127.0.0.0/8"],"root_squash":false}'
A_URL="iscsi://127.0.0.1:$A_ISCSI/iqn.2026-12.io.nasd:mp/0"
NFS_A="nfs://127.0.0.1/shared/files?nfsport=$A_NFS&mountport=$A_MOUNT"
timeout 120 "$CT" "$NFS_A" basic >/dev/null || fail "libnfs procedure test on a ceph dataset"

gw B
use B
expect 201 POST pools/shared/import "$(ceph_import_json)"
[ "$(jget "$BODY" '[.volumes, .datasets] | tostring')" = "[1,2]" ] || fail "import did not bring lun0, files, spare: $BODY"
# showing a dataset on B does not keep its lock: A can still export it afterwards
expect 200 GET datasets/shared/spare
[ "$(jget "$BODY" .error)" = null ] || fail "B cannot read an idle dataset: $BODY"
expect 200 GET datasets/shared/files
[ "$(jget "$BODY" .error)" = "held by another gateway" ] || fail "files on B while A serves it: $BODY"
use A
expect 201 POST exports/nfs '{"dataset":"shared/spare","name":"spare","clients":["127.0.0.0/8"]}'
use B
expect 201 POST exports/iscsi '{"name":"mp","volume":"shared/lun0"}'
B_URL="iscsi://127.0.0.1:$B_ISCSI/iqn.2026-12.io.nasd:mp/0"
sa=$(serial "$A_URL") sb=$(serial "$B_URL")
[ -n "$sa" ] && [ "$sa" = "$sb" ] || fail "the two gateways show different serials: '$sa' '$sb'"
# a volume A creates later reaches B with a sync from the cluster's record
use A
expect 201 POST volumes '{"pool":"shared","name":"later","size":"16M"}'
use B
expect 200 POST pools/shared/sync
[ "$(jget "$BODY" '[.added[].name] | tostring')" = '["later"]' ] || fail "sync did not add 'later': $BODY"
expect 200 GET volumes/shared/later
use A
expect 200 PATCH volumes/shared/later '{"size":"32M"}'
use B
expect 200 POST pools/shared/sync
[ "$(jget "$BODY" '.added | length')" = 0 ] || fail "a second sync added again: $BODY"
[ "$(api GET volumes/shared/later | jq -r .size)" = $((32 << 20)) ] || fail "size grown on A not synced: $BODY"
expect 405 GET pools/shared/sync
"$PAT" write "$A_URL" 1 16 >/dev/null || fail "write through A"
"$PAT" verify "$B_URL" 1 16 >/dev/null || fail "B does not read A's writes"
"$PAT" write "$B_URL" 2 8 >/dev/null || fail "write through B"
"$PAT" verify "$A_URL" 2 8 >/dev/null || fail "A does not read B's writes"

# the dataset has one writer: B is refused while A serves it
api POST exports/nfs '{"dataset":"shared/files","name":"files","clients":["127.0.0.0/8"],"root_squash":false}' >/dev/null
[ "$STATUS" = 409 ] || fail "B exported a dataset A holds: $STATUS $BODY"
echo "  B while A holds the dataset: $(jget "$BODY" .error.message)"
head -c 1500000 /dev/urandom > "$T/blob"
nfs-cp "$T/blob" "nfs://127.0.0.1/shared/files/blob?nfsport=$A_NFS&mountport=$A_MOUNT" >/dev/null || fail "nfs-cp to A"

# kill -9 A in the middle of FUA writes; B keeps serving everything A acknowledged
"$PAT" write "$A_URL" 3 64 > "$T/acked" 2>/dev/null &
wpid=$!
for _ in $(seq 100); do [ "$(tail -1 "$T/acked" | awk '{print $2}')" -gt 1000 ] 2>/dev/null && break; sleep 0.05; done
{ kill -9 $A_PID; wait $A_PID; } 2>/dev/null; A_PID=
wait $wpid 2>/dev/null
acked=$(tail -1 "$T/acked" | awk '{print $2}')
[ -n "$acked" ] && [ "$acked" -gt 0 ] || fail "no write acknowledged before the kill"
"$PAT" verify "$B_URL" 3 "${acked}b" >/dev/null || fail "B lost blocks A acknowledged (acked $acked)"
echo "  kill -9 of A after $acked acknowledged 4 KiB blocks: all on B"
ok=
for _ in $(seq 60); do   # A's lock goes once its RADOS watch times out (5 s in cluster.sh)
  api POST exports/nfs '{"dataset":"shared/files","name":"files","clients":["127.0.0.0/8"],"root_squash":false}' >/dev/null
  [ "$STATUS" = 201 ] && { ok=1; break; }
  sleep 0.5
done
[ -n "$ok" ] || fail "B did not take the dataset over: $STATUS $BODY"
NFS_B="nfs://127.0.0.1/shared/files?nfsport=$B_NFS&mountport=$B_MOUNT"
[ "$(nfs-cat "nfs://127.0.0.1/shared/files/blob?nfsport=$B_NFS&mountport=$B_MOUNT" | sha256sum)" = "$(sha256sum < "$T/blob")" ] ||
  fail "file written through A is not served by B"
timeout 120 "$CT" "$NFS_B" basic >/dev/null || fail "libnfs procedure test on B after the takeover"
# self-test and /metrics on the ceph dataset's export
api POST exports/nfs/files/selftest '{"pattern":"4k-randwrite","seconds":2,"queue_depth":8}' >/dev/null
[ "$STATUS" = 202 ] || fail "selftest on the ceph dataset -> $STATUS: $BODY"
id=$(jget "$BODY" .id)
for _ in $(seq 100); do api GET "jobs/$id" >/dev/null; [ "$(jget "$BODY" .status)" = running ] || break; sleep 0.1; done
[ "$(jget "$BODY" .status)" = done ] && [ "$(jget "$BODY" .result.integrity)" = ok ] || fail "NFS selftest: $BODY"
echo "  selftest 4k-randwrite on the RBD dataset: $(jget "$BODY" '.result.iops|floor') IOPS"
v=$(curl -sf "${B_API%/api/v1}/metrics" |
    grep '^nasd_export_ops_total{type="nfs",export="files",op="write"} ' | awk '{print $2}')
[ -n "$v" ] && [ "$v" -gt 0 ] || fail "/metrics write ops for the ceph dataset export: '$v'"
echo "ceph gateways: ok"
