#!/bin/bash
# What iSCSI sessions share, against hostile initiators (tools/iscsi_shared):
# - the data-out buffer pool: initiators on two addresses hold WRITEs whose Data-Out never
#   comes (the whole 256 MiB); a third address still writes (each address has its own cap
#   and a small share beyond the global one), and the holders are dropped once their
#   Data-Out is overdue (--dout-timeout 3; 30 s in the daemon), also one that stops reading
#   its replies so that the target stops reading it;
# - a LU's persistent-reservation registrants: at most 256; a RESERVE(6) is not ended by a
#   login of its nexus that never completes;
# - writes a reset or a reinstating login said were gone: on the daemon's raidz1 volume
#   (writes slow enough to still run), 'Y' written after LOGICAL UNIT RESET was answered,
#   or after the new login, stays 'Y' (an aborted 'X' landed on top of it before).
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/integration/lib.sh
SH=build/tools/iscsi_shared
[ -x "$SH" ] || fail "$SH not built"
use_asan_build
SERVE=${B:-build}/tools/iscsi_serve
T=$(mktemp -d /tmp/nasd-iscsi-shared.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; stop_nasd; rm -rf "$T"; }
trap cleanup EXIT
IQN=iqn.2026-12.test.nasd:shared
truncate -s 1G "$T/lun0.img"
"$SERVE" --portal 127.0.0.1:0 --iqn "$IQN" --file "$T/lun0.img" --dout-timeout 3 >"$T/serve.out" 2>"$T/serve.err" &
pid=$!
for _ in $(seq 200); do grep -q '^ready' "$T/serve.out" && break; sleep 0.05; done
port=$(awk '/^ready/ {print $3}' "$T/serve.out")
[ -n "$port" ] || { cat "$T/serve.err"; fail "iscsi_serve did not start"; }
timeout 60 "$SH" doutstarve "$port" "$IQN" 3 || fail "data-out pool"
timeout 60 "$SH" pausedhold "$port" "$IQN" 3 || fail "holder that does not read"
# before prregs: RESERVE(6) conflicts with persistent registrations
timeout 60 "$SH" res6loss "$port" "$IQN" || fail "RESERVE(6) kept through an unfinished login"
timeout 60 "$SH" prregs "$port" "$IQN" 300 || fail "registrants"
kill "$pid"; wait "$pid"; rc=$?; pid=
[ $rc = 0 ] && ! grep -q -E 'AddressSanitizer|runtime error' "$T/serve.err" || { tail -30 "$T/serve.err"; fail "iscsi_serve exit $rc"; }

mkdir -p "$T/d"
start_nasd "$T/d" --nfs-bind ""
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"raidz1\",\"members\":[{\"path\":\"$T/d/m0\",\"size\":\"512M\",\"create\":true},
  {\"path\":\"$T/d/m1\",\"size\":\"512M\",\"create\":true},{\"path\":\"$T/d/m2\",\"size\":\"512M\",\"create\":true}]}"
expect 201 POST volumes '{"pool":"tank","name":"v","size":"128M"}'
expect 201 POST exports/iscsi '{"name":"race","volume":"tank/v"}'
timeout 120 "$SH" abortrace "$ISCSI_PORT" iqn.2026-12.io.nasd:race 20 || fail "LU reset race"
timeout 120 "$SH" reinstrace "$ISCSI_PORT" iqn.2026-12.io.nasd:race 20 || fail "reinstatement race"
echo "39_iscsi_shared: ok"
