#!/bin/bash
# Web UI layout and presentation (tests/browser/layout.mjs): seeds pools, volumes, datasets
# and exports with 62-character names over REST, then checks every page at phone size
# (390x844) and at 1280x800 for horizontal overflow, plus the collapsible menu.
set -u
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
. "$(dirname "$0")/ui_common.sh"

TMP=$(mktemp -d /tmp/nasd-ui71-XXXXXX)
KEEP=${E2E_KEEP:-0}
cleanup() { stop_nasd; if [ "$KEEP" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi; }
trap cleanup EXIT
SHOTS=${E2E_SHOTS:-$(dirname "$NASD")/ui-screenshots}/layout
mkdir -p "$TMP/state" "$TMP/disks" "$SHOTS" || fail "cannot create $SHOTS"
rm -f "$SHOTS"/*.png

start_nasd "$TMP/state"
timeout 150 node tests/browser/layout.mjs --url "http://127.0.0.1:$HTTP_PORT" --tmp "$TMP/disks" --shots "$SHOTS"
rc=$?
if [ $rc -ne 0 ]; then KEEP=1; echo "--- nasd log (last 30 lines)"; tail -n 30 "$TMP/state/nasd.log"; fi
exit $rc
