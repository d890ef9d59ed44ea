#!/bin/bash
# Replication streams between two nasd processes over HTTP: a full stream of s1, then
# the changes s1..s2, received into a pool of the second daemon, reproduce the source
# bit for bit (checksummed per unit and end to end); a corrupted or cut stream fails
# cleanly and leaves the previous copy untouched.
set -u
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-repl.XXXXXX)
PAT=$ROOT/build/tools/iscsi_pattern
mkdir -p "$T/a" "$T/b"
trap 'stop_nasd; kill $PID_A 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
IQN=iqn.2026-12.io.nasd

start_nasd "$T/a"
PID_A=$NASD_PID; API_A=$API; ISCSI_A=$ISCSI_PORT
expect 201 POST pools "{\"name\":\"src\",\"layout\":\"${LAYOUT:-raidz1-inplace}\",\"members\":[
  {\"path\":\"$T/a0.img\",\"size\":\"96M\",\"create\":true},{\"path\":\"$T/a1.img\",\"size\":\"96M\",\"create\":true},
  {\"path\":\"$T/a2.img\",\"size\":\"96M\",\"create\":true}]}"
[ "$(api GET pools/src | jq -r .layout)" = "${LAYOUT:-raidz1-inplace}" ] || fail "layout of src"
expect 201 POST volumes '{"pool":"src","name":"v","size":"24M","block_size":4096,"compression":"lz4"}'
expect 201 POST exports/iscsi '{"name":"v","volume":"src/v"}'
$PAT write "iscsi://127.0.0.1:$ISCSI_A/$IQN:v/0" 1 12 >/dev/null || fail "write A"
expect 201 POST volumes/src/v/snapshots '{"name":"s1"}'
$PAT write "iscsi://127.0.0.1:$ISCSI_A/$IQN:v/0" 2 3 >/dev/null || fail "write B"
expect 200 PATCH volumes/src/v '{"size":"32M"}'   # the increment grows the copy too
expect 201 POST volumes/src/v/snapshots '{"name":"s2"}'
curl -sf -o "$T/full" "$API_A/volumes/src/v/snapshots/s1/send" || fail "send s1"
curl -sf -o "$T/inc" "$API_A/volumes/src/v/snapshots/s2/send?from=s1" || fail "send s1..s2"
[ "$(stat -c %s "$T/inc")" -lt $((5 << 20)) ] || fail "incremental stream is $(stat -c %s "$T/inc") bytes for 3 MiB of changes"
expect 400 GET "volumes/src/v/snapshots/s1/send?from=s2"
expect 404 GET "volumes/src/v/snapshots/nope/send"

unset HTTP_PORT ISCSI_PORT NFS_PORT MOUNT_PORT
start_nasd "$T/b"
expect 201 POST pools "{\"name\":\"dst\",\"layout\":\"stripe\",\"members\":[{\"path\":\"$T/b0.img\",\"size\":\"128M\",\"create\":true}]}"
post_stream() {   # post_stream FILE VOLUME [QUERY] -> STATUS, BODY
  local out
  out=$(curl -s -w '\n%{http_code}' -X POST -H 'Content-Type: application/octet-stream' --data-binary @"$1" \
        "$API/volumes/dst/$2/receive${3:-}")
  STATUS=${out##*$'\n'}; BODY=${out%$'\n'*}
}
# a cut full stream creates nothing
head -c $(( $(stat -c %s "$T/full") / 2 )) "$T/full" > "$T/cut"
post_stream "$T/cut" r
[ "$STATUS" = 400 ] || fail "cut stream -> $STATUS: $BODY"
expect 404 GET volumes/dst/r
post_stream "$T/full" r "?block_size=1000"
[ "$STATUS" = 400 ] || fail "block_size 1000 -> $STATUS: $BODY"
post_stream "$T/full" r "?block_size=4096"
[ "$STATUS" = 201 ] && [ "$(jget "$BODY" .name)" = s1 ] || fail "receive full -> $STATUS: $BODY"
expect 200 GET volumes/dst/r
[ "$(jget "$BODY" .size)" = $((24 << 20)) ] && [ "$(jget "$BODY" .compression)" = lz4 ] &&
  [ "$(jget "$BODY" .block_size)" = 4096 ] || fail "the copy's settings are not the source's: $BODY"
expect 201 POST exports/iscsi '{"name":"r","volume":"dst/r"}'
R="iscsi://127.0.0.1:$ISCSI_PORT/$IQN:r/0"
$PAT verify "$R" 1 12 >/dev/null || fail "received copy is not s1"
# a corrupted incremental stream is refused; the copy still reads s1
cp "$T/inc" "$T/bad"
printf '\xff' | dd of="$T/bad" bs=1 seek=$(( $(stat -c %s "$T/bad") / 2 )) conv=notrunc status=none
expect 204 DELETE exports/iscsi/r
post_stream "$T/bad" r
[ "$STATUS" = 400 ] || fail "corrupt stream -> $STATUS: $BODY"
expect 201 POST exports/iscsi '{"name":"r","volume":"dst/r"}'
$PAT verify "$R" 1 12 >/dev/null || fail "copy changed by a refused stream"
# the refused increment had grown the copy to 32 MiB first: the undo shrinks it back
cap=$(iscsi-readcapacity16 -s "$R")
[ "$cap" = $((24 << 20)) ] || fail "the copy's LUN after a refused growing increment: $cap bytes"

expect 204 DELETE exports/iscsi/r
post_stream "$T/inc" r "?block_size=512"
[ "$STATUS" = 201 ] && [ "$(jget "$BODY" .name)" = s2 ] || fail "receive incremental -> $STATUS: $BODY"
expect 200 GET volumes/dst/r
[ "$(jget "$BODY" .size)" = $((32 << 20)) ] || fail "the grown copy's size: $BODY"
[ "$(jget "$BODY" .block_size)" = 4096 ] || fail "an increment changed the copy's block size: $BODY"
post_stream "$T/inc" r
[ "$STATUS" = 409 ] || fail "same increment twice -> $STATUS: $BODY"

# bit for bit: the received snapshot's stream equals the source's, and so does the data
curl -sf -o "$T/full2" "$API/volumes/dst/r/snapshots/s2/send" || fail "send from the copy"
curl -sf -o "$T/full2src" "$API_A/volumes/src/v/snapshots/s2/send" || fail "send s2 from the source"
cmp -s "$T/full2" "$T/full2src" || fail "streams of s2 differ between source and copy"
[ "$(jget "$(curl -s "$API/volumes/dst/r/snapshots/s2")" .guid)" = \
  "$(jget "$(curl -s "$API_A/volumes/src/v/snapshots/s2")" .guid)" ] || fail "snapshot guid not kept"
expect 201 POST exports/iscsi '{"name":"r","volume":"dst/r"}'
$PAT verify "$R" 2 3 >/dev/null || fail "received copy is not s2"
# kill -9 of the receiving nasd in the middle of a receive (tried with growing delays
# until one lands after the volume was created and before the snapshot): after the
# restart the same stream is received again without any cleanup
cut=
for d in 0.02 0.04 0.06 0.08 0.1 0.13 0.16 0.2; do
  logpos=$(stat -c %s "$T/b/nasd.log")
  curl -s -o /dev/null -X POST -H 'Content-Type: application/octet-stream' --data-binary @"$T/full" "$API/volumes/dst/k/receive" &
  CP=$!
  sleep $d
  kill -9 $NASD_PID; wait $NASD_PID 2>/dev/null; NASD_PID=; wait $CP 2>/dev/null
  log=$(tail -c +$((logpos + 1)) "$T/b/nasd.log")
  start_nasd "$T/b"
  if grep -q "volume k created" <<<"$log" && ! grep -q "received k@" <<<"$log"; then cut=$d; break; fi
  api GET volumes/dst/k >/dev/null
  [ "$STATUS" = 200 ] && break   # completed before the kill
done
echo "receive cut by kill -9 after ${cut:-(none landed mid-way)} s"
api GET volumes/dst/k >/dev/null
if [ "$STATUS" != 200 ]; then
  post_stream "$T/full" k
  [ "$STATUS" = 201 ] || fail "receive after an interrupted one -> $STATUS: $BODY"
fi
expect 201 POST exports/iscsi '{"name":"k","volume":"dst/k"}'
$PAT verify "iscsi://127.0.0.1:$ISCSI_PORT/$IQN:k/0" 1 12 >/dev/null || fail "copy after the interrupted receive"
# a stream of a volume larger than the pool's unreserved space, or sent to a dataset:
# refused before anything is made (a stream's header names its size: a few hundred bytes
# could otherwise ask for a PiB)
fill=$(( $(api GET pools/dst | jq .size) - (48 << 20) - (16 << 20) ))
expect 201 POST volumes "{\"pool\":\"dst\",\"name\":\"fill\",\"size\":$fill}"
post_stream "$T/full" big
[ "$STATUS" = 507 ] && grep -q "fit here" <<<"$BODY" || fail "stream beyond the free space -> $STATUS: $BODY"
expect 404 GET volumes/dst/big
expect 204 DELETE volumes/dst/fill
# a forced full receive over a volume without snapshots: a cut stream leaves the old data
# (the volume was destroyed before the stream was read, and its row pointed at nothing)
expect 201 POST volumes '{"pool":"dst","name":"keep","size":"24M"}'
expect 201 POST exports/iscsi '{"name":"keep","volume":"dst/keep"}'
KEEP="iscsi://127.0.0.1:$ISCSI_PORT/$IQN:keep/0"
$PAT write "$KEEP" 2 3 >/dev/null || fail "write keep"
expect 204 DELETE exports/iscsi/keep
post_stream "$T/cut" keep "?force=1"
[ "$STATUS" = 400 ] || fail "cut stream with force -> $STATUS: $BODY"
expect 201 POST exports/iscsi '{"name":"keep","volume":"dst/keep"}'
$PAT verify "$KEEP" 2 3 >/dev/null || fail "a cut forced receive changed the volume it was to replace"
expect 204 DELETE exports/iscsi/keep
post_stream "$T/full" keep "?force=1"
[ "$STATUS" = 201 ] || fail "forced full receive -> $STATUS: $BODY"
expect 201 POST exports/iscsi '{"name":"keep","volume":"dst/keep"}'
$PAT verify "$KEEP" 1 12 >/dev/null || fail "the forced receive did not replace the data"
expect 204 DELETE exports/iscsi/keep
expect 200 GET volumes
[ "$(jget "$BODY" '[.[] | select(.name | startswith("-recv-"))] | length')" = 0 ] || fail "a receive's volume is listed: $BODY"
expect 204 DELETE 'volumes/dst/keep?force=true'
# a user's volume named like a temporary one (recv:<name> at first) is not taken for a leftover
expect 201 POST volumes '{"pool":"dst","name":"keep","size":"24M"}'
expect 201 POST volumes '{"pool":"dst","name":"recv:keep","size":"4M"}'
post_stream "$T/full" keep "?force=1"
[ "$STATUS" = 201 ] || fail "forced full receive beside recv:keep -> $STATUS: $BODY"
expect 201 POST exports/iscsi '{"name":"rk","volume":"dst/recv:keep"}'   # still there to serve
expect 204 DELETE exports/iscsi/rk
expect 204 DELETE 'volumes/dst/recv:keep?force=true'
expect 204 DELETE 'volumes/dst/keep?force=true'   # its space: the receives below need it
out=$(curl -s -w '\n%{http_code}' -X POST -H 'Content-Type: application/octet-stream' --data-binary @"$T/full" \
      "$API/datasets/dst/dsr/receive")
[ "${out##*$'\n'}" = 400 ] && grep -q "cannot be received as a dataset" <<<"$out" || fail "volume stream to a dataset -> $out"
expect 404 GET datasets/dst/dsr
# a body larger than the pool could receive: no longer spooled to the state dir's disk
# once past that (413; spooled whole and then refused as a stream before)
out=$(head -c 140M /dev/zero | curl -s -w '\n%{http_code}' -X POST -H 'Content-Type: application/octet-stream' \
      --data-binary @- "$API/volumes/dst/huge/receive")
[ "${out##*$'\n'}" = 413 ] && grep -q "larger than its pool" <<<"$out" || fail "140 MiB stream to a 128 MiB pool -> $out"
expect 200 GET pools/dst
# a receive is applied off the REST thread: other calls are answered meanwhile, and
# changes to its target wait for it (409)
stop_nasd
export NASD_TEST_RECEIVE_DELAY_MS=2000
start_nasd "$T/b"
unset NASD_TEST_RECEIVE_DELAY_MS
(post_stream "$T/full" slow; echo "$STATUS" > "$T/slow.status") &
SLOW=$!
sleep 0.5
t0=$(date +%s%N)
expect 200 GET system
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ms" -lt 1000 ] || fail "GET /system took $ms ms during a receive"
post_stream "$T/full" slow
[ "$STATUS" = 409 ] && grep -q receiving <<<"$BODY" || fail "a second receive into the same volume -> $STATUS: $BODY"
wait $SLOW
[ "$(cat "$T/slow.status")" = 201 ] || fail "the receive that ran meanwhile -> $(cat "$T/slow.status")"
expect 200 GET volumes/dst/slow
# while a receive into it runs (the same stream again, forced), an existing volume's
# record takes no change either
(post_stream "$T/full" slow "?force=1"; echo "$STATUS" > "$T/slow.status") &
SLOW=$!
sleep 0.5
expect 409 PATCH volumes/dst/slow '{"comment":"x"}'
[ "$(jget "$BODY" .error.code)" = receiving ] || fail "change during a receive: $BODY"
wait $SLOW
[ "$(cat "$T/slow.status")" = 201 ] || fail "the forced receive again -> $(cat "$T/slow.status")"
expect 200 PATCH volumes/dst/slow '{"comment":"x"}'
# a client that leaves while its receive runs: the receive ends, its record is made, and
# its volume takes changes again
curl -s -o /dev/null --max-time 1 -X POST -H 'Content-Type: application/octet-stream' --data-binary @"$T/full" \
     "$API/volumes/dst/left/receive"
wait_for_status() { for _ in $(seq 50); do api GET "$1" >/dev/null; [ "$STATUS" = 200 ] && return 0; sleep 0.1; done; fail "$1: $STATUS"; }
wait_for_status volumes/dst/left
expect 204 DELETE 'volumes/dst/left?force=true'
echo "send/receive: ok"
