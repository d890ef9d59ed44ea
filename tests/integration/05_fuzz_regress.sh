#!/bin/bash
# Every libFuzzer harness (tests/fuzz/*) over its seed corpus and its saved crash inputs,
# under ASan+UBSan: a finding that was fixed once must stay fixed. Built with -j2: the
# clang build of libnasd is most of this test's time (54 s serial, 34 s with -j2 here).
cd "$(dirname "$0")/../.." || exit 1
exec make -j2 -s --no-print-directory fuzz-regress
