#!/bin/bash
# Web UI end to end: starts nasd (lib.sh start_nasd: temp state dir, free high ports) and runs
# tests/browser/e2e.mjs in Debian's chromium driven by playwright-core. Installs chromium
# (apt, as root) and the npm packages (npm ci) when they are missing.
# A mirror pool is written to two files with build/tools/vpool_tool beforehand, for the UI
# to import (skipped with a notice when the tool is not built).
# Screenshots (dashboard.png, selftest.png, pool.png, nfs.png, failure.png) go to E2E_SHOTS, by default
# ui-screenshots/ beside the nasd binary (build/ui-screenshots). E2E_KEEP=1 keeps the temp
# dir with nasd's state and log (it is always kept on failure).
set -u
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

. "$(dirname "$0")/ui_common.sh"

TMP=$(mktemp -d /tmp/nasd-ui-XXXXXX)
KEEP=${E2E_KEEP:-0}
cleanup() {
  stop_nasd
  if [ "$KEEP" = 1 ]; then echo "kept $TMP (nasd state and log)"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
SHOTS=${E2E_SHOTS:-$(dirname "$NASD")/ui-screenshots}
mkdir -p "$TMP/state" "$TMP/disks" "$SHOTS" || fail "cannot create $SHOTS"
rm -f "$SHOTS"/*.png

IMPORT_ARGS=()
VPOOL_TOOL=$(dirname "$NASD")/tools/vpool_tool
if [ -x "$VPOOL_TOOL" ]; then
  mkdir -p "$TMP/import" && "$VPOOL_TOOL" create "$TMP/import" mirror 2 64 8 >/dev/null ||
    fail "vpool_tool could not write a pool to import"
  IMPORT_ARGS=(--import-dir "$TMP/import")
else
  echo "note: $VPOOL_TOOL not built; the pool import step is skipped"
fi

start_nasd "$TMP/state"
curl -sf "http://127.0.0.1:$HTTP_PORT/" | grep -q '<main' || fail "GET / does not serve web/index.html"

timeout 150 node tests/browser/e2e.mjs --url "http://127.0.0.1:$HTTP_PORT" --tmp "$TMP/disks" --shots "$SHOTS" "${IMPORT_ARGS[@]}"
rc=$?
if [ $rc -ne 0 ]; then
  KEEP=1
  echo "--- nasd log (last 40 lines)"
  tail -n 40 "$TMP/state/nasd.log"
  exit $rc
fi

# the same UI against a nasd that requires API tokens
stop_nasd
TOKEN=$("$NASD" --db "$TMP/state/nasd.db" --create-token e2e 2>/dev/null) || fail "--create-token"
unset HTTP_PORT
start_nasd "$TMP/state" --auth
[ "$(curl -s -o /dev/null -w '%{http_code}' "$API/system")" = 401 ] || fail "--auth: API open without a token"
timeout 60 node tests/browser/auth.mjs --url "http://127.0.0.1:$HTTP_PORT" --token "$TOKEN" --pool e2epool
