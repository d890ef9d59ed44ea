# Shared by the browser test wrappers (70_-74_): makes sure Debian's chromium and the npm
# packages (playwright-core) are installed, then gives each test a temp dir. Source after lib.sh.
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
