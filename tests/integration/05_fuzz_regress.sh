#!/bin/bash
# Every libFuzzer harness (tests/fuzz/*) over its seed corpus and its saved crash inputs,
# under ASan+UBSan: a finding that was fixed once must stay fixed.
cd "$(dirname "$0")/../.." || exit 1
exec make -s --no-print-directory fuzz-regress
