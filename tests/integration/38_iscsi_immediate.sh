#!/bin/bash
# ImmediateData per iSCSI export: a REST field, off unless asked, kept across a restart and
# negotiated only for the exports that enable it. With it on, data sent with the command
# (4 KiB writes: all of it; 256 KiB: the first burst, then R2T'd Data-Out) reads back
# intact, and iscsi-test-cu passes but for iSCSIDataSnInvalid, which needs R2T for every
# write even after a relogin renegotiated ImmediateData. Bad values get 400.
# lane: side
set -u
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-imm.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
PATTERN=${B:-build}/tools/iscsi_pattern
start_nasd "$T"
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"raidz1-inplace\",\"members\":[
  {\"path\":\"$T/d0.img\",\"size\":\"512M\",\"create\":true},{\"path\":\"$T/d1.img\",\"size\":\"512M\",\"create\":true},
  {\"path\":\"$T/d2.img\",\"size\":\"512M\",\"create\":true}]}"
expect 201 POST volumes '{"pool":"tank","name":"v0","size":"256M"}'
expect 201 POST volumes '{"pool":"tank","name":"v1","size":"64M"}'

body=$(api POST exports/iscsi '{"name":"plain","volume":"tank/v1"}')
[ "$STATUS" = 201 ] && [ "$(jget "$body" .immediate_data)" = false ] || fail "default export: $STATUS $body"
body=$(api POST exports/iscsi '{"name":"imm","volume":"tank/v0","immediate_data":true}')
[ "$STATUS" = 201 ] && [ "$(jget "$body" .immediate_data)" = true ] || fail "immediate export: $STATUS $body"
for bad in '"yes"' 1 null; do
  expect 400 POST exports/iscsi "{\"name\":\"bad\",\"volume\":\"tank/v1\",\"immediate_data\":$bad}"
done
expect 400 PATCH exports/iscsi/plain '{"immediate_data":"no"}'

URL_I=iscsi://127.0.0.1:$ISCSI_PORT/iqn.2026-12.io.nasd:imm/0
URL_P=iscsi://127.0.0.1:$ISCSI_PORT/iqn.2026-12.io.nasd:plain/0
for per_io in 1 64; do
  "$PATTERN" write "$URL_I" $per_io 8 $per_io >/dev/null || fail "pattern write, $per_io blocks per command"
  "$PATTERN" verify "$URL_I" $per_io 8 64 || fail "pattern verify after $per_io-block writes"
done
"$PATTERN" write "$URL_P" 5 4 1 >/dev/null && "$PATTERN" verify "$URL_P" 5 4 >/dev/null || fail "plain export pattern"
grep -q "to iqn.2026-12.io.nasd:imm (digests none/none, immediate data yes)" "$T/nasd.log" ||
  fail "immediate data not negotiated for imm: $(grep 'session from' "$T/nasd.log" | tail -3)"
grep -q "to iqn.2026-12.io.nasd:plain (digests none/none, immediate data no)" "$T/nasd.log" ||
  fail "immediate data negotiated for plain: $(grep 'session from' "$T/nasd.log" | tail -3)"

# kept across a restart; PATCH turns it off and on
stop_nasd
start_nasd "$T"
api GET exports/iscsi/imm >/dev/null
[ "$(jget "$BODY" .immediate_data)" = true ] || fail "lost across restart: $BODY"
"$PATTERN" verify "$URL_I" 64 8 64 >/dev/null || fail "data after restart"
for v in true false; do
  api PATCH exports/iscsi/plain "{\"immediate_data\":$v}" >/dev/null
  [ "$STATUS" = 200 ] && [ "$(jget "$BODY" .immediate_data)" = $v ] || fail "patch to $v: $STATUS $BODY"
done

run_iscsi_test_cu "$URL_I" "$T/cu.log" iSCSIDataSnInvalid || exit 1
kill -0 $NASD_PID 2>/dev/null || fail "nasd died"
api GET pools/tank >/dev/null
[ "$(jget "$BODY" .unrepairable)" = 0 ] || fail "pool reports unrepairable errors: $BODY"
echo "PASS: immediate data per export"
