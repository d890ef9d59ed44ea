#!/bin/bash
# The web UI creates a ceph pool (tests/browser/ceph.mjs in chromium) on a real single-node
# cluster: backend choice, client-side and server-side errors, the pool listed ONLINE.
set -u
. "$(dirname "$0")/lib.sh"
. "$ROOT/tests/ceph/lib.sh"
cd "$ROOT" || exit 1
. "$(dirname "$0")/ui_common.sh"
T=$(mktemp -d /tmp/nasd-it-ceph-ui.XXXXXX)
trap 'stop_nasd; ceph_down; rm -rf "$T"' EXIT
SHOTS=${E2E_SHOTS:-$(dirname "$NASD")/ui-screenshots}/ceph
mkdir -p "$T/gw" "$SHOTS"
ceph_up "$T"
start_nasd "$T/gw"
timeout 150 node tests/browser/ceph.mjs --url "http://127.0.0.1:$HTTP_PORT" --shots "$SHOTS" --mon "$CEPH_MON" --key "$CEPH_KEY" ||
  { tail -n 20 "$T/gw/nasd.log"; fail "ceph pool from the UI"; }
