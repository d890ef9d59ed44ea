# Shared by the browser test wrappers (70_-74_): makes sure Debian's chromium and the npm
# packages (playwright-core) are installed; ui_page_test runs one page script against a fresh
# nasd. Source after lib.sh.
[ -x "$NASD" ] || fail "$NASD not built (run make)"
command -v node >/dev/null || fail "node is not installed"
if [ ! -x /usr/bin/chromium ]; then
  [ "$(id -u)" = 0 ] || fail "/usr/bin/chromium is missing and we are not root to install it"
  echo "installing chromium (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq chromium >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; } ||
    fail "apt-get install chromium failed"
fi
if [ ! -f "$ROOT/tests/browser/node_modules/playwright-core/package.json" ]; then
  echo "installing playwright-core (npm ci)"
  (cd "$ROOT/tests/browser" && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci in tests/browser failed"
fi

# ui_page_test TAG SCRIPT: a fresh nasd, then tests/browser/SCRIPT against it with screenshots
# under ui-screenshots/TAG. On failure the nasd log's tail is shown and the temp dir kept.
# Returns the script's status.
ui_page_test() {
  TMP=$(mktemp -d "/tmp/nasd-ui-$1-XXXXXX")
  KEEP=${E2E_KEEP:-0}
  trap 'stop_nasd; if [ "$KEEP" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi' EXIT
  SHOTS=${E2E_SHOTS:-$(dirname "$NASD")/ui-screenshots}/$1
  mkdir -p "$TMP/state" "$TMP/disks" "$SHOTS" || fail "cannot create $SHOTS"
  rm -f "$SHOTS"/*.png
  start_nasd "$TMP/state"
  timeout 150 node "tests/browser/$2" --url "http://127.0.0.1:$HTTP_PORT" --tmp "$TMP/disks" --shots "$SHOTS"
  local rc=$?
  if [ $rc -ne 0 ]; then KEEP=1; echo "--- nasd log (last 30 lines)"; tail -n 30 "$TMP/state/nasd.log"; fi
  return $rc
}
