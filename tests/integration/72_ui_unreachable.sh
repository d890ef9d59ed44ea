#!/bin/bash
# Web UI when nasd goes away (tests/browser/unreachable.mjs): the test kills nasd under an
# open dashboard, expects the "nasd unreachable" banner with the last data kept, restarts
# nasd on the same ports (restart.sh below) and expects the banner to go; then the same
# with nasd frozen (SIGSTOP: requests time out) and thawed.
set -u
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
. "$(dirname "$0")/ui_common.sh"

TMP=$(mktemp -d /tmp/nasd-ui72-XXXXXX)
KEEP=${E2E_KEEP:-0}
cleanup() {
  [ -f "$TMP/nasd.pid" ] && kill -CONT "$(cat "$TMP/nasd.pid")" 2>/dev/null && NASD_PID=$(cat "$TMP/nasd.pid")
  stop_nasd
  if [ "$KEEP" = 1 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
SHOTS=${E2E_SHOTS:-$(dirname "$NASD")/ui-screenshots}/unreachable
mkdir -p "$TMP/state" "$TMP/disks" "$SHOTS" || fail "cannot create $SHOTS"
rm -f "$SHOTS"/*.png

start_nasd "$TMP/state"
echo "$NASD_PID" > "$TMP/nasd.pid"
# restart.sh: nasd again on the same ports and state; its pid replaces the old one in nasd.pid
cat > "$TMP/restart.sh" <<EOS
#!/bin/bash
. "$ROOT/tests/integration/lib.sh"
HTTP_PORT=$HTTP_PORT ISCSI_PORT=$ISCSI_PORT NFS_PORT=$NFS_PORT MOUNT_PORT=$MOUNT_PORT
start_nasd "$TMP/state" </dev/null
echo \$NASD_PID > "$TMP/nasd.pid"
EOS
chmod +x "$TMP/restart.sh"

timeout 120 node tests/browser/unreachable.mjs --url "http://127.0.0.1:$HTTP_PORT" --tmp "$TMP/disks" --shots "$SHOTS" \
  --pidfile "$TMP/nasd.pid" --restart "$TMP/restart.sh"
rc=$?
if [ $rc -ne 0 ]; then KEEP=1; echo "--- nasd log (last 30 lines)"; tail -n 30 "$TMP/state/nasd.log"; fi
exit $rc
