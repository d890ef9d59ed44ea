#!/bin/bash
# Self-tests over the real protocols from inside nasd (iSCSI via libiscsi, NFS via
# libnfs), the monitoring API (/stats, /stats/history, /metrics), argument checks,
# one job per export and four in all, and job results surviving a restart.
set -u
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-selftest.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
start_nasd "$T"

expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"stripe\",\"members\":[{\"path\":\"$T/d0.img\",\"size\":\"512M\",\"create\":true}]}"
expect 201 POST volumes '{"pool":"tank","name":"vol1","size":"128M"}'
expect 201 POST datasets '{"pool":"tank","name":"share"}'
expect 201 POST exports/iscsi '{"name":"t1","volume":"tank/vol1"}'
expect 201 POST exports/nfs '{"dataset":"tank/share","name":"share","clients":["127.0.0.0/8"]}'

# argument checks
expect 400 POST exports/iscsi/t1/selftest '{"pattern":"metadata","seconds":2}'
expect 400 POST exports/iscsi/t1/selftest '{"pattern":"4k-randwrite","seconds":2}'
expect 400 POST exports/nfs/share/selftest '{"pattern":"4k-randread","seconds":0}'
expect 400 POST exports/nfs/share/selftest '{"pattern":"4k-randread","seconds":301}'
expect 400 POST exports/nfs/share/selftest '{"pattern":"4k-randread","queue_depth":257}'
expect 400 POST exports/nfs/share/selftest '{"pattern":"8k-randread"}'
expect 400 POST exports/nfs/share/selftest '{"pattern":"4k-randread","bogus":1}'
expect 404 POST exports/nfs/nope/selftest '{"pattern":"4k-randread"}'
expect 404 POST exports/nfs/share/scrub '{}'
expect 405 GET exports/nfs/share/selftest
expect 404 GET jobs/999
expect 404 GET jobs/abc
expect 400 GET "stats/history?export=iscsi:1&range=7d"
expect 400 GET "stats/history?export=iscsi1"
expect 400 GET "stats/history?export=smb:1"
expect 404 GET "stats/history?export=iscsi:99"
expect 404 GET stats/nope

# run_job EXPORT PATTERN [extra json] -> waits, leaves the job in $BODY
run_job() {
  api POST "exports/$1/selftest" "{\"pattern\":\"$2\",\"seconds\":2,\"queue_depth\":8${3:-}}" >/dev/null
  [ "$STATUS" = 202 ] || fail "start $2 on $1 -> $STATUS: $BODY"
  local id; id=$(jget "$BODY" .id)
  [ "$(jget "$BODY" .status)" = running ] || fail "new job not running: $BODY"
  for _ in $(seq 300); do
    api GET "jobs/$id" >/dev/null
    [ "$(jget "$BODY" .status)" = running ] || break
    sleep 0.1
  done
  [ "$(jget "$BODY" .status)" = done ] || fail "$2 on $1: $BODY"
  local r; r=$(jget "$BODY" .result)
  echo "  $1 $2: $(jq -c '{iops:(.iops|floor), mbps:(.mbps*10|floor/10), lat_p50_us:(.lat_p50_us|floor), lat_p99_us:(.lat_p99_us|floor), integrity, verified_blocks, bad_blocks, errors}' <<<"$r")"
  [ "$(jget "$r" .integrity)" = ok ] || fail "integrity on $1 $2: $BODY"
  [ "$(jget "$r" '.iops > 0 and .ops > 0 and .errors == 0')" = true ] || fail "no IOPS on $1 $2: $BODY"
  [ "$(jget "$BODY" '.progress == 1 and (.timeline | length) >= 1')" = true ] || fail "progress/timeline: $BODY"
  if [ "$2" != metadata ]; then
    [ "$(jget "$r" '.mbps > 0 and .bytes > 0')" = true ] || fail "no MB/s on $1 $2: $BODY"
  fi
}

run_job iscsi/t1 4k-randread
run_job iscsi/t1 512-seqread
run_job iscsi/t1 4k-randwrite ',"destructive":true'
run_job nfs/share 4k-randread
run_job nfs/share 512-seqread
run_job nfs/share 4k-randwrite
run_job nfs/share metadata
# CHAP + initiator ACL: the job logs in with the export's credentials as an allowed initiator
expect 201 POST volumes '{"pool":"tank","name":"vol2","size":"16M","block_size":4096}'
expect 201 POST exports/iscsi '{"name":"t2","volume":"tank/vol2","chap_user":"u1","chap_secret":"secret123456","initiators":["iqn.2026-12.test:host"]}'
run_job iscsi/t2 4k-randread
expect 400 POST exports/iscsi/t2/selftest '{"pattern":"512-seqread","seconds":1}' # 4 KiB blocks
# all_squash to an unprivileged uid; read-only exports are refused
expect 201 POST datasets '{"pool":"tank","name":"sq"}'
expect 201 POST exports/nfs '{"dataset":"tank/sq","name":"sq","all_squash":true,"anonuid":4321,"anongid":4321}'
run_job nfs/sq metadata
expect 201 POST datasets '{"pool":"tank","name":"ro"}'
expect 201 POST exports/nfs '{"dataset":"tank/ro","name":"ro","read_only":true}'
expect 409 POST exports/nfs/ro/selftest '{"pattern":"4k-randread"}'
SHARE="nfs://127.0.0.1$(api GET exports/nfs/share | jq -r .path)?nfsport=$NFS_PORT&mountport=$MOUNT_PORT"
LEFT=$(nfs-ls "$SHARE") || fail "nfs-ls $SHARE"
printf '%s' "$LEFT" | grep -q nasd-selftest && fail "NFS temp dir left in the dataset: $LEFT"

# one running job per export
expect 202 POST exports/nfs/share/selftest '{"pattern":"4k-randread","seconds":2,"queue_depth":4}'
busy=$(jget "$BODY" .id)
expect 409 POST exports/nfs/share/selftest '{"pattern":"metadata","seconds":1}'
expect 202 POST exports/iscsi/1/selftest '{"pattern":"4k-randread","seconds":1,"queue_depth":1}'
for _ in $(seq 100); do [ "$(api GET jobs | jq '[.[] | select(.status == "running")] | length')" = 0 ] && break; sleep 0.1; done
[ "$(api GET jobs/$busy | jq -r .status)" = done ] || fail "busy job: $BODY"
# at most 4 at once in all (NFS exports of one dataset each took one: 12 ran, 61 threads)
expect 201 POST datasets '{"pool":"tank","name":"fifth"}'
expect 201 POST exports/nfs '{"dataset":"tank/fifth","name":"fifth"}'
for e in iscsi/t1 iscsi/t2 nfs/share nfs/sq; do
  expect 202 POST exports/$e/selftest '{"pattern":"4k-randread","seconds":3,"queue_depth":1}'
done
expect 409 POST exports/nfs/fifth/selftest '{"pattern":"4k-randread","seconds":1,"queue_depth":1}'
jget "$BODY" .error.message | grep -q "the most at once" || fail "fifth self-test: $BODY"
for _ in $(seq 100); do [ "$(api GET jobs | jq '[.[] | select(.status == "running")] | length')" = 0 ] && break; sleep 0.1; done
expect 202 POST exports/nfs/fifth/selftest '{"pattern":"4k-randread","seconds":1,"queue_depth":1}'
for _ in $(seq 100); do [ "$(api GET jobs | jq '[.[] | select(.status == "running")] | length')" = 0 ] && break; sleep 0.1; done

# monitoring saw the traffic
sleep 1.2
api GET stats >/dev/null
for t in iscsi:t1 nfs:share; do
  x=$(jget "$BODY" ".exports[] | select(.type + \":\" + .name == \"$t\")")
  [ -n "$x" ] || fail "no $t export in /stats: $BODY"
  [ "$(jget "$x" '.totals.read_ops > 0 and .totals.write_ops > 0 and .totals.read_bytes > 0 and .totals.cpu_ns > 0')" = true ] \
    || fail "$t counters did not move: $x"
done
api GET "stats/history?export=iscsi:t1&range=5m" >/dev/null
[ "$STATUS" = 200 ] || fail "history: $STATUS $BODY"
[ "$(jget "$BODY" '.resolution == 1 and ([.samples[] | select(.read_iops > 0)] | length) >= 1')" = true ] \
  || fail "no per-second history with reads: $BODY"
expect 200 GET "stats/history?export=nfs:1&range=24h"
[ "$(jget "$BODY" .resolution)" = 60 ] || fail "24h resolution: $BODY"

M=$(curl -sf "http://127.0.0.1:$HTTP_PORT/metrics") || fail "/metrics"
for t in 'type="iscsi",export="t1"' 'type="nfs",export="share"'; do
  v=$(grep "^nasd_export_ops_total{$t,op=\"read\"} " <<<"$M" | awk '{print $2}')
  [ -n "$v" ] && [ "$v" -gt 0 ] || fail "/metrics read ops for $t: '$v'"
  grep -q "^nasd_export_latency_seconds_bucket{$t,le=\"+Inf\"} [1-9]" <<<"$M" || fail "/metrics latency histogram for $t"
  grep -q "^nasd_export_cpu_seconds_total{$t} " <<<"$M" || fail "/metrics cpu for $t"
done
grep -q '^nasd_up 1$' <<<"$M" || fail "nasd_up"
psize=$(api GET pools/tank | jq -r .size)
grep -q "^nasd_pool_size_bytes{pool=\"tank\"} $psize\$" <<<"$M" || fail "pool size gauge (want $psize)"
grep -q '^nasd_pool_state{pool="tank",state="ONLINE"} 1$' <<<"$M" || fail "pool state gauge"
grep -q '^nasd_pool_dirty_bytes{pool="tank"} [0-9][0-9]*$' <<<"$M" || fail "pool write-back gauge"
[ "$(api GET pools/tank | jq '.dirty_bytes | type')" = '"number"' ] || fail "pool dirty_bytes"

# results survive a restart, newest first
before=$(api GET jobs | jq -c '[.[] | {id, status, integrity: .result.integrity, iops: .result.iops}]')
[ "$(jget "$before" 'length')" = 16 ] || fail "expected 16 jobs: $before"
[ "$(jget "$before" '.[0].id > .[1].id')" = true ] || fail "not newest first: $before"
stop_nasd
start_nasd "$T"
after=$(api GET jobs | jq -c '[.[] | {id, status, integrity: .result.integrity, iops: .result.iops}]')
[ "$before" = "$after" ] || fail "jobs differ after restart: $before vs $after"
echo "ok: self-tests over iSCSI and NFS, monitoring, metrics"
