#!/bin/bash
# #10.4: a self-test whose requests fail ends "failed" and names the cause: an NFS
# 4k-randwrite on a dataset with a 1M quota fails with cause NOSPC or QUOTA (out of space),
# counts the failed requests and says so in "error"; a clean run stays "done" with cause null;
# an iSCSI self-test that cannot log in (wrong CHAP secret in the DB) names LOGIN.
set -u
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-stfail.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
start_nasd "$T"

expect 201 POST pools "{\"name\":\"tank\",\"members\":[{\"path\":\"$T/d0.img\",\"size\":\"512M\",\"create\":true}]}"
expect 201 POST datasets '{"pool":"tank","name":"small","quota":"1M"}'
expect 201 POST exports/nfs '{"dataset":"tank/small","name":"small","clients":["127.0.0.0/8"]}'
expect 201 POST datasets '{"pool":"tank","name":"big"}'
expect 201 POST exports/nfs '{"dataset":"tank/big","name":"big","clients":["127.0.0.0/8"]}'

wait_job() {  # EXPORT PATTERN [extra] -> the finished job in $BODY
  api POST "exports/$1/selftest" "{\"pattern\":\"$2\",\"seconds\":2,\"queue_depth\":8${3:-}}" >/dev/null
  [ "$STATUS" = 202 ] || fail "start $2 on $1 -> $STATUS: $BODY"
  local id; id=$(jget "$BODY" .id)
  for _ in $(seq 300); do
    api GET "jobs/$id" >/dev/null
    [ "$(jget "$BODY" .status)" = running ] || break
    sleep 0.1
  done
}

wait_job nfs/small 4k-randwrite
echo "quota 1M: $(jq -c '{status, state, cause, errors, error}' <<<"$BODY")"
[ "$(jget "$BODY" .status)" = failed ] || fail "4k-randwrite on a 1M quota did not fail: $BODY"
[ "$(jget "$BODY" .state)" = failed ] || fail "state: $BODY"
case $(jget "$BODY" .cause) in NOSPC|QUOTA) ;; *) fail "cause is not NOSPC/QUOTA: $BODY";; esac
[ "$(jget "$BODY" '.errors > 0')" = true ] || fail "errors not counted: $BODY"
jget "$BODY" .error | grep -q 'requests failed' || fail "error does not say requests failed: $BODY"

wait_job nfs/big 4k-randwrite
[ "$(jget "$BODY" '.status == "done" and .cause == null and .errors == 0')" = true ] || fail "clean run: $BODY"
echo "clean run: done, cause null"

expect 201 POST volumes '{"pool":"tank","name":"v","size":"16M"}'
expect 201 POST exports/iscsi '{"name":"t","volume":"tank/v","chap_user":"u1","chap_secret":"secret123456"}'
# the running target keeps its secret; the job reads the row again, so a changed row makes
# the job log in with a secret the target does not accept
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"UPDATE iscsi_exports SET chap_secret='wrongsecret99' WHERE name='t'\"); c.commit()" "$T/nasd.db" ||
  fail "cannot edit the DB"
wait_job iscsi/t 4k-randread
echo "wrong CHAP secret: $(jq -c '{status, cause, error}' <<<"$BODY")"
[ "$(jget "$BODY" '.status == "failed" and .cause == "LOGIN"')" = true ] || fail "login failure: $BODY"
echo "PASS: failed self-tests say so and name the cause"
