#!/bin/bash
# Hostile initiators against the iSCSI target (issue #11), each case a regression test
# for one defect: VERIFY/WRITE SAME/COMPARE AND WRITE with missing or short data-out,
# reinstatement and target removal while sessions are busy, resets with unread output
# queued, short and reflected mutual-CHAP challenges, client strings in the log. The
# target is the ASan+UBSan build of tools/iscsi_serve (make asan, part of make test)
# when it exists, so a use-after-free or over-read fails the test even when it does not
# crash; the hostile client is the plain build.
set -u
cd "$(dirname "$0")/../.." || exit 1
H=${B:-build}/tools/iscsi_hostile
[ -x "$H" ] || { echo "$H not built"; exit 1; }
. tests/integration/lib.sh && use_asan_build
SERVE=${B:-build}/tools/iscsi_serve
tmp=$(mktemp -d /tmp/nasd-iscsi-hostile.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail=0
IQN=iqn.2026-12.test.nasd:hostile
truncate -s 64M "$tmp/lun0.img"

start() {   # start ARGS...: iscsi_serve on a free port; sets pid, port
    "$SERVE" --portal 127.0.0.1:0 --iqn "$IQN" --file "$tmp/lun0.img" "$@" >"$tmp/serve.out" 2>"$tmp/serve.err" &
    pid=$!
    for _ in $(seq 200); do grep -q '^ready' "$tmp/serve.out" && break; sleep 0.05; done
    port=$(awk '/^ready/ {print $3}' "$tmp/serve.out")
    [ -n "$port" ] || { echo "iscsi_serve did not start"; cat "$tmp/serve.err"; exit 1; }
}
stop() {    # the server must exit cleanly: no sanitizer report, no crash
    kill "$pid" 2>/dev/null; wait "$pid"; local rc=$?; pid=
    if [ $rc != 0 ] || grep -q -E 'AddressSanitizer|runtime error' "$tmp/serve.err"; then
        printf '%-62s FAIL (exit %d)\n' "target exited cleanly ($1)" $rc
        grep -A12 -E 'ERROR: AddressSanitizer|runtime error' "$tmp/serve.err" | head -30; fail=1
    else printf '%-62s PASS\n' "target exited cleanly ($1)"; fi
}
run() { timeout 120 "$H" "$@" || fail=1; }

echo "== #11.1 data-out shorter than the command needs"
start
run verify "$port" "$IQN"
stop verify

echo "== #11.2 sessions dropped while their events are pending (reinstatement, target removal)"
start
run reinstate "$port" "$IQN" 40
"$H" pump "$port" "$IQN" 8 6 >"$tmp/pump.out" 2>&1 &
pump=$!
for _ in $(seq 12); do sleep 0.3; kill -USR1 "$pid"; sleep 0.3; kill -USR2 "$pid"; done
wait $pump; cat "$tmp/pump.out"
run reinstate "$port" "$IQN" 1
stop "reinstate, remove/re-add"

echo "== #11.3 write error on a connection with queued output"
start
run flushclose "$port" 60
run reinstate "$port" "$IQN" 1
stop flushclose

echo "== #11.9 mutual CHAP: short and reflected initiator challenges"
start --chap alice:alicesecret1 --mutual target1:targetsecret2
run chap "$port" "$IQN" alice:alicesecret1 target1:targetsecret2
stop chap

echo "== #11.8 client strings are escaped in the log"
start
run logname "$port" "$IQN"
stop logname
if grep -q '^2026-12-03 00:00:00.000 ERR FORGED' "$tmp/serve.err" || grep -q $'\x1b' "$tmp/serve.err"; then
    printf '%-62s FAIL\n' "InitiatorName newline/escape not in the log verbatim"; grep -n FORGED "$tmp/serve.err"; fail=1
elif grep -q 'test:x\\x0a2026-12-03.*FORGED-LINE\\x1b' "$tmp/serve.err"; then
    printf '%-62s PASS\n' "InitiatorName newline/escape logged as \\x0a / \\x1b"
else printf '%-62s FAIL\n' "escaped InitiatorName in the log"; grep -n FORGED "$tmp/serve.err"; fail=1; fi

[ $fail = 0 ] && echo "PASS" || echo "FAIL"
exit $fail
