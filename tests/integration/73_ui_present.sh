#!/bin/bash
# Web UI presentation (tests/browser/present.mjs): success notices, pool reservations and
# unreserved space in forms, quota warning, human units, idle resilver and latency, I/O
# history charts with units, dark mode, the force question and failed self-tests.
set -u
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
. "$(dirname "$0")/ui_common.sh"

TMP=$(mktemp -d /tmp/nasd-ui73-XXXXXX)
KEEP=${E2E_KEEP:-0}
cleanup() { stop_nasd; if [ "$KEEP" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi; }
trap cleanup EXIT
SHOTS=${E2E_SHOTS:-$(dirname "$NASD")/ui-screenshots}/present
mkdir -p "$TMP/state" "$TMP/disks" "$SHOTS" || fail "cannot create $SHOTS"
rm -f "$SHOTS"/*.png

start_nasd "$TMP/state"
timeout 150 node tests/browser/present.mjs --url "http://127.0.0.1:$HTTP_PORT" --tmp "$TMP/disks" --shots "$SHOTS"
rc=$?
if [ $rc -ne 0 ]; then KEEP=1; echo "--- nasd log (last 30 lines)"; tail -n 30 "$TMP/state/nasd.log"; fi
exit $rc
