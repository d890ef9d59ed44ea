#!/bin/bash
# libiscsi's iscsi-test-cu (destructive, all tests, two paths for the multipath tests)
# against the built-in iSCSI target served by tools/iscsi_serve on a sparse file.
# Fails if any test FAILED. Takes ~50 s on a 2-core machine.
# lane: side
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN=${B:-build}/tools/iscsi_serve
command -v iscsi-test-cu >/dev/null || { echo "iscsi-test-cu not installed (libiscsi-bin)"; exit 1; }
[ -x "$BIN" ] || { echo "$BIN not built"; exit 1; }
tmp=$(mktemp -d /tmp/nasd-iscsi-cu.XXXXXX)
pid=
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
    rm -rf "$tmp"
}
trap cleanup EXIT

IQN=iqn.2026-12.test.nasd:conformance
truncate -s 1G "$tmp/lun0.img"
"$BIN" --portal 127.0.0.1:0 --iqn "$IQN" --file "$tmp/lun0.img" --size 1G >"$tmp/serve.out" 2>"$tmp/serve.err" &
pid=$!
for _ in $(seq 100); do grep -q '^ready' "$tmp/serve.out" && break; sleep 0.1; done
port=$(awk '/^ready/ {print $3}' "$tmp/serve.out")
if [ -z "$port" ]; then echo "iscsi_serve did not start"; cat "$tmp/serve.err"; exit 1; fi

URL="iscsi://127.0.0.1:$port/$IQN/0"
. tests/integration/lib.sh
run_iscsi_test_cu "$URL" "$tmp/cu.log" || exit 1
if ! kill -0 "$pid" 2>/dev/null; then echo "FAIL: target died"; cat "$tmp/serve.err"; exit 1; fi
