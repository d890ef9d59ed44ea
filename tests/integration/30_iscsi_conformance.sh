#!/bin/bash
# libiscsi's iscsi-test-cu (destructive, all tests, two paths for the multipath tests)
# against the built-in iSCSI target served by tools/iscsi_serve on a sparse file.
# Fails if any test FAILED. Takes ~50 s on a 2-core machine.
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
start=$(date +%s)
timeout 600 iscsi-test-cu --dataloss --normal "$URL" "$URL" >"$tmp/cu.log" 2>&1
rc=$?
echo "iscsi-test-cu finished in $(( $(date +%s) - start ))s (exit $rc)"
grep -a -A4 'Run Summary' "$tmp/cu.log"
echo "skip notices: $(grep -a -c '\[SKIPPED\]' "$tmp/cu.log") (unsupported optional commands, removable-media and sanitize tests)"
summary=$(grep -a -E '^ +tests +[0-9]+' "$tmp/cu.log")
failed=$(awk '{print $5}' <<<"$summary")
total=$(awk '{print $2}' <<<"$summary")
if [ -z "$summary" ] || [ "$rc" -ne 0 ]; then
    echo "FAIL: no summary / abnormal exit"; tail -40 "$tmp/cu.log"; exit 1
fi
if [ "$failed" != 0 ]; then
    echo "FAIL: $failed of $total tests failed:"
    grep -a 'had failures' "$tmp/cu.log" | sort | uniq -c
    grep -a -A8 'had failures' "$tmp/cu.log" | head -80
    exit 1
fi
if ! kill -0 "$pid" 2>/dev/null; then echo "FAIL: target died"; cat "$tmp/serve.err"; exit 1; fi
echo "PASS: $total tests, 0 failed"
