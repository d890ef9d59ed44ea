#!/bin/bash
# Hostile input to the built-in iSCSI target (tools/iscsi_malformed: truncated and
# garbage PDUs, bogus lengths, huge AHS, PDUs before login, bad digests, fuzzing),
# then CHAP (one-way, mutual, wrong secrets) and the initiator ACL with libiscsi tools.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/integration/lib.sh && use_asan_build   # ASan+UBSan build when made (make asan)
B=${B:-build}
for t in iscsi_serve iscsi_malformed; do [ -x "$B/tools/$t" ] || { echo "$B/tools/$t not built"; exit 1; }; done
command -v iscsi-inq >/dev/null || { echo "iscsi-inq not installed (libiscsi-bin)"; exit 1; }
tmp=$(mktemp -d /tmp/nasd-iscsi-mal.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
check() {   # check NAME EXPECTED(0|1) CMD...: expected 0 = must succeed, 1 = must fail
    local name=$1 want=$2; shift 2
    timeout 20 "$@" >"$tmp/cmd.out" 2>&1; local rc=$?
    if { [ "$want" = 0 ] && [ $rc = 0 ]; } || { [ "$want" = 1 ] && [ $rc != 0 ] && [ $rc != 124 ]; }; then
        printf '%-58s PASS\n' "$name"
    else
        printf '%-58s FAIL (rc %d)\n' "$name" $rc; sed 's/^/    /' "$tmp/cmd.out" | head -5; fail=1
    fi
}
start() {   # start NAME ARGS...: sets $port
    local name=$1; shift
    "$B/tools/iscsi_serve" --portal 127.0.0.1:0 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pids+=($!)
    for _ in $(seq 100); do grep -q '^ready' "$tmp/$name.out" && break; sleep 0.1; done
    port=$(awk '/^ready/ {print $3}' "$tmp/$name.out")
    [ -n "$port" ] || { echo "iscsi_serve $name did not start"; cat "$tmp/$name.err"; exit 1; }
}

truncate -s 64M "$tmp/lun0.img"
IQN=iqn.2026-12.test.nasd:malformed
OK_INI=iqn.2026-12.test:allowed
BAD_INI=iqn.2026-12.test:intruder

echo "== malformed PDUs"
start plain --iqn "$IQN" --file "$tmp/lun0.img" --allow iqn.2026-12.test:malformed --allow "$OK_INI"
plain_pid=${pids[-1]}
"$B/tools/iscsi_malformed" --idle "$port" "$IQN" >"$tmp/idle.out" 2>&1 &   # checked at the end (~15 s)
idle_pid=$!
"$B/tools/iscsi_malformed" "$port" "$IQN" || fail=1
check "target process survived" 0 kill -0 "$plain_pid"
check "normal initiator still served (iscsi-inq)" 0 iscsi-inq -i "$OK_INI" "iscsi://127.0.0.1:$port/$IQN/0"

echo "== initiator ACL"
check "allowed initiator: READ CAPACITY" 0 iscsi-readcapacity16 -i "$OK_INI" "iscsi://127.0.0.1:$port/$IQN/0"
check "other initiator refused" 1 iscsi-inq -i "$BAD_INI" "iscsi://127.0.0.1:$port/$IQN/0"
timeout 20 iscsi-ls -i "$BAD_INI" "iscsi://127.0.0.1:$port" >"$tmp/ls.out" 2>&1
if grep -q "$IQN" "$tmp/ls.out"; then echo "SendTargets hides target from other initiator      FAIL"; fail=1
else printf '%-58s PASS\n' "SendTargets hides target from other initiator"; fi
timeout 20 iscsi-ls -i "$OK_INI" "iscsi://127.0.0.1:$port" >"$tmp/ls.out" 2>&1
if grep -q "$IQN" "$tmp/ls.out"; then printf '%-58s PASS\n' "SendTargets lists target to allowed initiator"
else echo "SendTargets lists target to allowed initiator      FAIL"; cat "$tmp/ls.out"; fail=1; fi

echo "== session reinstatement"
"$B/tools/iscsi_malformed" --hold "$port" "$IQN" >"$tmp/hold.out" 2>&1 &
hold_pid=$!
for _ in $(seq 50); do grep -q held "$tmp/hold.out" && break; sleep 0.1; done
check "new login with the same initiator+ISID" 0 "$B/tools/iscsi_malformed" --login "$port" "$IQN"
if wait "$hold_pid"; then printf '%-58s PASS\n' "older session with that ISID dropped"
else echo "older session with that ISID dropped                      FAIL"; cat "$tmp/hold.out"; fail=1; fi

echo "== live remove / re-add of the target"
"$B/tools/iscsi_malformed" --hold "$port" "$IQN" >"$tmp/hold.out" 2>&1 &
hold_pid=$!
for _ in $(seq 50); do grep -q held "$tmp/hold.out" && break; sleep 0.1; done
kill -USR1 "$plain_pid"
if wait "$hold_pid"; then printf '%-58s PASS\n' "session dropped when its target is removed"
else echo "session dropped when its target is removed               FAIL"; cat "$tmp/hold.out"; fail=1; fi
check "removed target refuses logins" 1 iscsi-inq -i "$OK_INI" "iscsi://127.0.0.1:$port/$IQN/0"
kill -USR2 "$plain_pid"
sleep 0.2
check "re-added target serves again" 0 iscsi-inq -i "$OK_INI" "iscsi://127.0.0.1:$port/$IQN/0"

echo "== CHAP"
start chap --iqn "$IQN" --file "$tmp/lun0.img" --chap alice:alicesecret1 --mutual target1:targetsecret2
U="127.0.0.1:$port/$IQN/0"
check "one-way CHAP, right secret" 0 iscsi-inq "iscsi://alice%alicesecret1@$U"
check "one-way CHAP, wrong secret" 1 iscsi-inq "iscsi://alice%wrongsecret1@$U"
check "one-way CHAP, wrong user" 1 iscsi-inq "iscsi://mallory%alicesecret1@$U"
check "no credentials on a CHAP target" 1 iscsi-inq "iscsi://$U"
check "mutual CHAP, right target secret" 0 iscsi-inq "iscsi://alice%alicesecret1@$U?target_user=target1&target_password=targetsecret2"
check "mutual CHAP, wrong target secret rejected by initiator" 1 iscsi-inq "iscsi://alice%alicesecret1@$U?target_user=target1&target_password=bogus"
check "CHAP target still serving" 0 iscsi-readcapacity16 "iscsi://alice%alicesecret1@$U"

wait "$idle_pid" || fail=1
cat "$tmp/idle.out"

[ $fail = 0 ] && echo "PASS" || echo "FAIL"
exit $fail
