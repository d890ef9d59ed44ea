#!/bin/bash
# Web UI presentation (tests/browser/present.mjs): success notices, pool reservations and
# unreserved space in forms, quota warning, human units, idle resilver and latency, I/O
# history charts with units, dark mode, the force question and failed self-tests.
set -u
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
. "$(dirname "$0")/ui_common.sh"

ui_page_test present present.mjs
