#!/bin/bash
# A ceph pool end to end over iSCSI: a real single-node Ceph cluster (tests/ceph/cluster.sh),
# the pool created over REST (the cephx key kept, never shown), an RBD volume exported over
# iSCSI passing iscsi-test-cu --dataloss and pattern writes, its identity (NAA) stable,
# self-tests and /metrics on the export, and bad ceph settings refused with clear errors.
# lane: side
set -u
. "$(dirname "$0")/lib.sh"
. "$ROOT/tests/ceph/lib.sh"
T=$(mktemp -d /tmp/nasd-it-ceph.XXXXXX)
trap 'stop_nasd; ceph_down; rm -rf "$T"' EXIT
ceph_up "$T"
mkdir -p "$T/gw"
start_nasd "$T/gw"

# hostile or wrong settings
expect 400 POST pools '{"name":"c","backend":"ceph"}'
expect 400 POST pools '{"name":"c","backend":"ceph","ceph":{"monitors":"127.0.0.1:1","pool":"rbd"}}'
expect 400 POST pools "{\"name\":\"c\",\"backend\":\"ceph\",\"ceph\":{\"monitors\":\"$CEPH_MON\",\"pool\":\"rbd\",\"key\":\"not base64!\"}}"
expect 400 POST pools "{\"name\":\"c\",\"backend\":\"ceph\",\"ceph\":{\"monitors\":\"$CEPH_MON\",\"pool\":\"rbd\",\"key\":\"$CEPH_KEY\",\"bogus\":1}}"
expect 400 POST pools "{\"name\":\"c\",\"backend\":\"ceph\",\"members\":[\"/tmp/x\"],\"ceph\":{\"monitors\":\"$CEPH_MON\",\"pool\":\"rbd\",\"key\":\"$CEPH_KEY\"}}"
expect 400 POST pools '{"name":"c","backend":"zfs"}'
expect 503 POST pools "$(ceph_pool_json c nosuchpool)"
grep -q "nosuchpool: does not exist" <<<"$BODY" || fail "missing RADOS pool error unclear: $BODY"
wrongkey=$(ceph-authtool --gen-print-key)
expect 503 POST pools "{\"name\":\"c\",\"backend\":\"ceph\",\"ceph\":{\"monitors\":\"$CEPH_MON\",\"pool\":\"rbd\",\"key\":\"$wrongkey\"}}"

expect 201 POST pools "$(ceph_pool_json rbdpool)"
grep -q "$CEPH_KEY" <<<"$BODY" && fail "the cephx key is returned: $BODY"
[ "$(jget "$BODY" '.backend + " " + .layout + " " + .state + " " + (.ceph.key_set|tostring)')" = "ceph ceph ONLINE true" ] ||
  fail "ceph pool status: $BODY"
[ "$(jget "$BODY" .free)" -gt $((1 << 30)) ] || fail "free space not from the cluster: $BODY"
api GET pools >/dev/null; grep -q "$CEPH_KEY" <<<"$BODY" && fail "the cephx key is listed"
expect 400 POST volumes '{"pool":"rbdpool","name":"z","size":"64M","compression":"lz4"}'
expect 201 POST volumes '{"pool":"rbdpool","name":"lun0","size":"64M"}'
rbd info rbd/lun0 >/dev/null 2>&1 || fail "no RBD image rbd/lun0"
[ "$(jget "$BODY" .used)" -lt $((8 << 20)) ] || fail "a new volume is not thin: $BODY"
expect 409 POST pools "$(ceph_pool_json again)"   # a second pool over the same RADOS pool must import
expect 201 POST exports/iscsi '{"name":"cu","volume":"rbdpool/lun0"}'
URL="iscsi://127.0.0.1:$ISCSI_PORT/iqn.2026-12.io.nasd:cu/0"

PAT=$ROOT/build/tools/iscsi_pattern
"$PAT" write "$URL" 7 16 >/dev/null || fail "pattern write"
"$PAT" verify "$URL" 7 16 >/dev/null || fail "pattern verify"
[ "$(api GET volumes/rbdpool/lun0 | jq -r .used)" -ge $((16 << 20)) ] || fail "used space not from RBD: $BODY"
# serial and NAA are the same 16 bytes (from the cluster fsid, RADOS pool id and image id)
serial=$(iscsi-inq -e 1 -c 128 "$URL" | sed -n 's/^Unit Serial Number:\[\(.*\)\]/\1/p')
[ ${#serial} = 32 ] || fail "no unit serial number: '$serial'"

run_iscsi_test_cu "$URL" "$T/cu.log" || exit 1

# self-test, per-export stats and /metrics on the ceph-backed export
api POST exports/iscsi/cu/selftest '{"pattern":"4k-randwrite","seconds":2,"queue_depth":8,"destructive":true}' >/dev/null
[ "$STATUS" = 202 ] || fail "selftest on a ceph export -> $STATUS: $BODY"
id=$(jget "$BODY" .id)
for _ in $(seq 100); do api GET "jobs/$id" >/dev/null; [ "$(jget "$BODY" .status)" = running ] || break; sleep 0.1; done
[ "$(jget "$BODY" .status)" = done ] && [ "$(jget "$BODY" .result.integrity)" = ok ] || fail "selftest: $BODY"
echo "  selftest 4k-randwrite on RBD: $(jget "$BODY" '.result.iops|floor') IOPS"
M=$(curl -sf "http://127.0.0.1:$HTTP_PORT/metrics") || fail "/metrics"
v=$(grep '^nasd_export_ops_total{type="iscsi",export="cu",op="write"} ' <<<"$M" | awk '{print $2}')
[ -n "$v" ] && [ "$v" -gt 0 ] || fail "/metrics write ops for the ceph export: '$v'"
expect 200 GET "stats/history?export=iscsi:1&range=1h"

# the LUN keeps its identity and data across a restart (identity from the cluster and image id)
"$PAT" write "$URL" 9 8 >/dev/null || fail "pattern write before the restart"
stop_nasd
start_nasd "$T/gw"
for _ in $(seq 50); do iscsi-inq "$URL" >/dev/null 2>&1 && break; sleep 0.2; done
[ "$(iscsi-inq -e 1 -c 128 "$URL" | sed -n 's/^Unit Serial Number:\[\(.*\)\]/\1/p')" = "$serial" ] ||
  fail "unit serial changed after a restart"
"$PAT" verify "$URL" 9 8 >/dev/null || fail "pattern lost across a restart"
expect 204 DELETE exports/iscsi/cu
expect 204 DELETE volumes/rbdpool/lun0
rbd info rbd/lun0 >/dev/null 2>&1 && fail "RBD image left after DELETE"
expect 204 DELETE pools/rbdpool
echo "ceph iSCSI: ok"
