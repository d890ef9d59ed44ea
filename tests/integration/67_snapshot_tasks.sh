#!/bin/bash
# Periodic snapshot tasks keep the newest N of their snapshots; a replication task
# copies a volume to a second nasd (API token required there) over HTTP, first in full,
# then incrementally, and keeps N replicated snapshots on the target.
set -u
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-tasks.XXXXXX)
PAT=$ROOT/build/tools/iscsi_pattern
mkdir -p "$T/a" "$T/b"
DRIP_PID=
PX_PID=
trap 'stop_nasd; kill $PID_B $DRIP_PID $PX_PID 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
IQN=iqn.2026-12.io.nasd

TOK=$("$NASD" --db "$T/b/nasd.db" --create-token repl) || fail "--create-token"
start_nasd "$T/b" --auth
PID_B=$NASD_PID; API_B=$API; HTTP_B=$HTTP_PORT; ISCSI_B=$ISCSI_PORT
apib() {   # apib METHOD PATH [JSON]
  local out
  out=$(curl -s -w '\n%{http_code}' -X "$1" -H "Authorization: Bearer $TOK" ${3:+-H 'Content-Type: application/json' --data "$3"} "$API_B/$2")
  STATUS=${out##*$'\n'}; BODY=${out%$'\n'*}
}
apib POST pools "{\"name\":\"dst\",\"layout\":\"stripe\",\"members\":[{\"path\":\"$T/b0.img\",\"size\":\"128M\",\"create\":true}]}"
[ "$STATUS" = 201 ] || fail "pool on B: $STATUS $BODY"

unset HTTP_PORT ISCSI_PORT NFS_PORT MOUNT_PORT
start_nasd "$T/a"
expect 201 POST pools "{\"name\":\"src\",\"layout\":\"mirror\",\"members\":[
  {\"path\":\"$T/a0.img\",\"size\":\"96M\",\"create\":true},{\"path\":\"$T/a1.img\",\"size\":\"96M\",\"create\":true}]}"
expect 201 POST volumes '{"pool":"src","name":"v","size":"16M","block_size":4096}'
expect 201 POST exports/iscsi '{"name":"v","volume":"src/v"}'
URL=iscsi://127.0.0.1:$ISCSI_PORT/$IQN:v/0
$PAT write "$URL" 1 16 >/dev/null || fail "write A"

# snapshot task: runs at once, then on demand; keeps 2
expect 400 POST snapshot-tasks '{"volume":"src/v","every":"5x","keep":2}'
expect 404 POST snapshot-tasks '{"volume":"src/nope","every":"1h","keep":2}'
# an admin's snapshots that start with the prefix are not the task's: retention keeps them
expect 201 POST volumes/src/v/snapshots '{"name":"hourly-keepme"}'
expect 201 POST volumes/src/v/snapshots '{"name":"hourly-20200101-000000-x"}'
expect 201 POST snapshot-tasks '{"volume":"src/v","every":"1h","keep":2,"prefix":"hourly"}'
TID=$(jget "$BODY" .id)
# a second task of the object with that prefix, or a replication task's, would prune the other's
expect 409 POST snapshot-tasks '{"volume":"src/v","every":"15m","keep":5,"prefix":"hourly"}'
expect 400 POST snapshot-tasks '{"volume":"src/v","every":"15m","keep":5,"prefix":"repl7"}'
nsnaps() { api GET volumes/src/v/snapshots | jq "[.[] | select(.name | test(\"^$1-[0-9]{8}-[0-9]{6}(-[0-9]+)?\$\"))] | length"; }
wait_for() { for _ in $(seq 100); do eval "$1" && return 0; sleep 0.1; done; fail "timed out: $1"; }
wait_for '[ "$(nsnaps hourly)" = 1 ]'
for n in 2 3 4; do
  last=$(api GET snapshot-tasks/$TID | jq -r .last_run)
  expect 202 POST snapshot-tasks/$TID/run
  wait_for '[ "$(api GET snapshot-tasks/$TID | jq -r .last_run)" != 0 ]'
done
[ "$(nsnaps hourly)" = 2 ] || fail "retention: $(api GET volumes/src/v/snapshots)"
for s in hourly-keepme hourly-20200101-000000-x; do
  expect 200 GET volumes/src/v/snapshots/$s
done
expect 200 PATCH snapshot-tasks/$TID '{"enabled":false}'

# replication to B
expect 400 POST replication-tasks '{"volume":"src/v","target_url":"ftp://x","target_pool":"dst","every":"1h"}'
expect 201 POST replication-tasks "{\"volume\":\"src/v\",\"target_url\":\"http://127.0.0.1:$HTTP_B\",\"target_token\":\"$TOK\",
  \"target_pool\":\"dst\",\"target_name\":\"copy\",\"every\":\"1h\",\"keep\":2}"
RID=$(jget "$BODY" .id)
[ "$(jget "$BODY" .target_token_set)" = true ] && [ "$(jget "$BODY" .target_token)" = null ] || fail "token shown: $BODY"
# token and URL go into the request to the target: no line breaks or control characters
expect 400 PATCH replication-tasks/$RID '{"target_token":"abc\r\nX-Injected: yes"}'
expect 400 PATCH replication-tasks/$RID '{"target_url":"http://127.0.0.1:1\t/x"}'
expect 400 POST replication-tasks '{"volume":"src/v","target_url":"http://x:1","target_token":"a\u0001","target_pool":"dst","every":"1h"}'
expect 200 PATCH replication-tasks/$RID "{\"target_token\":\"$TOK\"}"
replicated() { api GET replication-tasks/$RID | jq -r '.last_snapshot // empty'; }
wait_for '[ -n "$(replicated)" ]'
[ "$(api GET replication-tasks/$RID | jq -r '.last_error // empty')" = "" ] || fail "replication: $BODY"
verify_b() {   # verify_b SEED MIB
  apib POST exports/iscsi '{"name":"c","volume":"dst/copy"}'
  [ "$STATUS" = 201 ] || fail "export on B: $STATUS $BODY"
  $PAT verify "iscsi://127.0.0.1:$ISCSI_B/$IQN:c/0" "$1" "$2" >/dev/null || fail "copy on B is not seed $1"
  apib DELETE exports/iscsi/c
}
verify_b 1 16
apib GET volumes/dst/copy
[ "$(jget "$BODY" .block_size)" = 4096 ] || fail "the replica's block size is not the source's: $BODY"
run_repl() {   # makes the task due, waits for its run to end, fails on its error
  local first; first=$(replicated)
  expect 202 POST replication-tasks/$RID/run
  wait_for '[ "$(api GET replication-tasks/$RID | jq -r .last_run)" != 0 ]'
  api GET replication-tasks/$RID >/dev/null
  [ "$(jget "$BODY" '.last_error // empty')" = "" ] || fail "incremental replication: $BODY"
  [ "$(replicated)" != "$first" ] || fail "no new snapshot replicated: $BODY"
}
for seed in 2 3 4; do
  $PAT write "$URL" $seed 2 >/dev/null || fail "write seed $seed"
  run_repl
  verify_b $seed 2
done
# runs within one second must not reuse a name the target still holds
for _ in 1 2 3; do run_repl; done
verify_b 4 2
apib GET volumes/dst/copy/snapshots
[ "$(jget "$BODY" 'length')" = 2 ] || fail "retention on the target: $BODY"
[ "$(api GET volumes/src/v/snapshots | jq '[.[] | select(.name | startswith("repl"))] | length')" = 1 ] ||
  fail "the source keeps more than the base: $(api GET volumes/src/v/snapshots)"
grep -q "incremental" "$T/a/nasd.log" || fail "no incremental send logged"

# the target applies a stream but its answer never reaches the source (a proxy drops it):
# the next run finds the target's newest snapshot here and goes on from it
PX=$(free_port)
python3 - "$PX" "$HTTP_B" "$T/px.ready" <<'PY' &
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8); open(sys.argv[3], "w").close()
s.settimeout(60)
while True:
    c, _ = s.accept()
    data = b""
    while b"\r\n\r\n" not in data: data += c.recv(65536)
    head = data.split(b"\r\n\r\n")[0].decode()
    n = int([l.split(":")[1] for l in head.split("\r\n") if l.lower().startswith("content-length:")][0])
    while len(data) - len(head) - 4 < n: data += c.recv(1 << 20)
    b = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
    b.sendall(data)
    resp = b""
    while True:
        r = b.recv(65536)
        if not r: break
        resp += r
    b.close()
    if not head.startswith("POST"): c.sendall(resp)
    c.close()
PY
PX_PID=$!
wait_for '[ -e "$T/px.ready" ]'
# the stored token is the old target's: a new URL needs its token (it was sent to the new host)
expect 400 PATCH replication-tasks/$RID "{\"target_url\":\"http://127.0.0.1:$PX\"}"
expect 200 PATCH replication-tasks/$RID "{\"target_url\":\"http://127.0.0.1:$PX\",\"target_token\":\"$TOK\"}"
$PAT write "$URL" 5 2 >/dev/null || fail "write seed 5"
first=$(replicated)
expect 202 POST replication-tasks/$RID/run
wait_for '[ -n "$(api GET replication-tasks/$RID | jq -r ".last_error // empty")" ]'
apib GET volumes/dst/copy/snapshots
landed=$(jget "$BODY" '.[-1].name')
[ "$landed" != "$first" ] || fail "the stream did not reach the target: $BODY"
kill $PX_PID 2>/dev/null
expect 200 PATCH replication-tasks/$RID "{\"target_url\":\"http://127.0.0.1:$HTTP_B\",\"target_token\":\"$TOK\"}"
expect 200 PATCH replication-tasks/$RID "{\"target_url\":\"http://127.0.0.1:$HTTP_B\",\"every\":\"1h\"}"   # unchanged URL
$PAT write "$URL" 6 2 >/dev/null || fail "write seed 6"
run_repl
verify_b 6 2

# a target that answers one byte every second: the task's request ends at its deadline,
# and a stop does not wait for it
DRIP=$(free_port)
python3 - "$DRIP" "$T/drip.accepted" <<'PY' &
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8); open(sys.argv[2] + ".ready", "w").close()
s.settimeout(60); c, _ = s.accept(); open(sys.argv[2], "w").close()
for b in b"HTTP/1.1 200 OK\r\n" * 100:
    c.send(bytes([b])); time.sleep(1)
PY
DRIP_PID=$!
wait_for '[ -e "$T/drip.accepted.ready" ]'
expect 201 POST replication-tasks "{\"volume\":\"src/v\",\"target_url\":\"http://127.0.0.1:$DRIP\",\"target_pool\":\"dst\",\"every\":\"1h\"}"
wait_for '[ -e "$T/drip.accepted" ]'
sleep 1
t0=$(date +%s%N)
stop_nasd
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
kill $DRIP_PID 2>/dev/null
[ "$ms" -lt 3000 ] || fail "stop took $ms ms with a request to a slow target running"
grep -q "replication task.*Operation canceled\|canceled" "$T/a/nasd.log" || echo "note: no cancel logged"
echo "snapshot and replication tasks: ok"
