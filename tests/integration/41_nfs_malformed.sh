#!/bin/bash
# Malformed RPC traffic against nfs_serve (bad record marks, oversized fragments,
# garbage XDR, wrong RPC version/program/procedure, truncated calls, bad auth):
# every case must get a clean error reply or a connection close, and a normal
# libnfs client must still work afterwards. Also: duplicate request cache (a
# retransmitted REMOVE gets the cached NFS3_OK, a new xid gets NOENT).
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/integration/lib.sh   # free_port, nfs_serve_up/down
use_asan_build
B=${B:-build}
SERVE=$B/tools/nfs_serve
MAL=$B/tools/nfs_malformed
RPC=$B/tools/nfs_rpc_check
for b in "$SERVE" "$MAL" "$RPC"; do [ -x "$b" ] || { echo "FAIL: missing $b (run make all)"; exit 1; }; done

TMP=$(mktemp -d /tmp/nfs41.XXXXXX)
PID=
cleanup() {
    if [ -n "$PID" ]; then kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; tail -20 "$TMP/log"; exit 1; }

NP=$(free_port); MP=$(free_port $NP)
mkdir -p "$TMP/exp"
echo "still serving" > "$TMP/exp/alive.txt"
nfs_serve_up "$TMP" --dir "$TMP/exp" --path /export --nfsport "$NP" --mountport "$MP"

timeout 120 "$MAL" 127.0.0.1 "$NP" "$MP" || fail "malformed cases"
kill -0 "$PID" || fail "server died"
echo "doomed" > "$TMP/exp/dup.txt"
timeout 20 "$RPC" 127.0.0.1 "$NP" "$MP" remove-dup /export dup.txt || fail "duplicate REMOVE not answered from the cache"
[ ! -e "$TMP/exp/dup.txt" ] || fail "dup.txt still exists"
out=$(timeout 20 nfs-cat "nfs://127.0.0.1/export/alive.txt?nfsport=$NP&mountport=$MP") || fail "normal client after malformed traffic"
[ "$out" = "still serving" ] || fail "unexpected content '$out'"
nfs_serve_down
echo "41_nfs_malformed: ok"
