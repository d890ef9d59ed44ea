#!/bin/bash
# #10.3: after NFS and iSCSI self-tests, deleting the exports, dataset, volume and pool
# really releases the storage (no "still in use" in the log, nasd holds no member file
# open), and the same names can be created again at once, with no restart. A delete that
# cannot release its storage (a self-test still running on the dataset) answers 409 and
# leaves config and storage as they were.
set -u
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-delete.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
start_nasd "$T"

run_job() {   # EXPORT PATTERN [extra] -> waits for the job
  api POST "exports/$1/selftest" "{\"pattern\":\"$2\",\"seconds\":${SECS:-1},\"queue_depth\":4${3:-}}" >/dev/null
  [ "$STATUS" = 202 ] || fail "start $2 on $1 -> $STATUS: $BODY"
  JOB=$(jget "$BODY" .id)
  [ -n "${NOWAIT:-}" ] && return
  for _ in $(seq 300); do
    api GET "jobs/$JOB" >/dev/null
    [ "$(jget "$BODY" .status)" = running ] || break
    sleep 0.1
  done
  [ "$(jget "$BODY" .status)" = done ] || fail "$2 on $1: $BODY"
}

member_open() { ls -l /proc/$NASD_PID/fd 2>/dev/null | grep -c "$T/d0.img"; }

setup() {   # the same names every round; round 2 reuses the destroyed pool's member file
  local mem="{\"path\":\"$T/d0.img\",\"size\":\"512M\",\"create\":true}"
  [ -e "$T/d0.img" ] && mem="\"$T/d0.img\""
  expect 201 POST pools "{\"name\":\"tank\",\"members\":[$mem]}"
  expect 201 POST volumes '{"pool":"tank","name":"vol1","size":"64M"}'
  expect 201 POST datasets '{"pool":"tank","name":"share"}'
  expect 201 POST exports/iscsi '{"name":"t1","volume":"tank/vol1"}'
  expect 201 POST exports/nfs '{"dataset":"tank/share","name":"share","clients":["127.0.0.0/8"]}'
}

teardown() {
  expect 204 DELETE exports/nfs/share
  expect 204 DELETE datasets/tank/share
  expect 204 DELETE exports/iscsi/t1
  expect 204 DELETE volumes/tank/vol1
  expect 204 DELETE pools/tank
  api GET pools >/dev/null
  [ "$(jget "$BODY" 'length')" = 0 ] || fail "pools left: $BODY"
  for _ in $(seq 20); do [ "$(member_open)" = 0 ] && break; sleep 0.1; done
  [ "$(member_open)" = 0 ] || fail "nasd still holds the member file open after the pool delete"
  if grep -E 'still in use|removed from config but not' "$T/nasd.log"; then fail "log says storage stayed held"; fi
}

for round in 1 2; do
  setup
  run_job iscsi/t1 4k-randwrite ',"destructive":true'
  run_job nfs/share 4k-randwrite
  run_job nfs/share metadata
  teardown
  echo "round $round: self-tests, then every delete released its storage"
done

# a delete while a self-test still holds the dataset: 204 only once the job has let go
# (it ends when its export goes), else 409 with the dataset still configured
setup
SECS=4 NOWAIT=1 run_job nfs/share 4k-randread
sleep 0.5
expect 204 DELETE exports/nfs/share
api DELETE datasets/tank/share >/dev/null
code=$STATUS msg=$(jget "$BODY" .error.message)
api GET "jobs/$JOB" >/dev/null
job=$(jget "$BODY" .status)
case $code in
  204) [ "$job" != running ] || fail "dataset delete answered 204 while the self-test still runs";;
  409) expect 200 GET datasets/tank/share
       echo "busy dataset: $msg"
       for _ in $(seq 100); do api GET "jobs/$JOB" >/dev/null; [ "$(jget "$BODY" .status)" = running ] || break; sleep 0.1; done
       expect 204 DELETE datasets/tank/share;;
  *) fail "dataset delete during a self-test: $code $msg";;
esac
echo "delete during a self-test: $code, job $job"
expect 201 POST datasets '{"pool":"tank","name":"share"}'
grep -E 'removed from config but not' "$T/nasd.log" && fail "half-deleted dataset"
echo "PASS: deletes release storage, and a dataset comes back under the same name at once"
