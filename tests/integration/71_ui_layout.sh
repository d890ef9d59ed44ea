#!/bin/bash
# Web UI layout and presentation (tests/browser/layout.mjs): seeds pools, volumes, datasets
# and exports with 62-character names over REST, then checks every page at phone size
# (390x844) and at 1280x800 for horizontal overflow, plus the collapsible menu.
set -u
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
. "$(dirname "$0")/ui_common.sh"

ui_page_test layout layout.mjs
