#!/bin/bash
# The Snapshots page in chromium (tests/browser/snapshots.mjs): snapshot, clone, refused
# and then successful delete, a periodic task that runs. Needs chromium and the npm
# packages of tests/browser (installed like 70_ui_browser.sh does).
set -u
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
command -v node >/dev/null || fail "node is not installed"
[ -x /usr/bin/chromium ] || fail "/usr/bin/chromium is missing (70_ui_browser.sh installs it)"
if [ ! -f tests/browser/node_modules/playwright-core/package.json ]; then
  (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci in tests/browser failed"
fi
T=$(mktemp -d /tmp/nasd-it-uisnap.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
start_nasd "$T"
expect 201 POST pools "{\"name\":\"sp\",\"layout\":\"stripe\",\"members\":[{\"path\":\"$T/d0.img\",\"size\":\"64M\",\"create\":true}]}"
expect 201 POST volumes '{"pool":"sp","name":"v","size":"8M"}'
timeout 60 node tests/browser/snapshots.mjs --url "http://127.0.0.1:$HTTP_PORT" || { tail -20 "$T/nasd.log"; fail "snapshots UI"; }
