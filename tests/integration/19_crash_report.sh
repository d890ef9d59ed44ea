#!/bin/bash
# A crash of the daemon leaves its cause in the log: a fatal signal (here SIGSEGV and
# SIGABRT sent from outside, as a wild pointer or a failed check would raise them) writes
# the signal and a backtrace to stderr, then the process dies of that signal (status
# 128+N, a core where enabled), and the restarted daemon serves the same state.
set -u
. "$(dirname "$0")/lib.sh"
ulimit -c 0   # the report is what this checks, not a core file in the working directory
T=$(mktemp -d /tmp/nasd-it-crash.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
for sig in SEGV ABRT; do
  start_nasd "$T"
  expect 200 GET system
  pos=$(stat -c %s "$T/nasd.log")
  kill -$sig $NASD_PID
  wait $NASD_PID
  rc=$?
  NASD_PID=
  num=$(kill -l $sig)
  [ $rc = $((128 + num)) ] || fail "nasd exited with $rc after SIG$sig, want $((128 + num))"
  out=$(tail -c +$((pos + 1)) "$T/nasd.log")
  grep -q "^nasd: fatal signal $num ($sig), backtrace:" <<<"$out" || fail "no report of SIG$sig in the log: $out"
  grep -q "nasd(+0x[0-9a-f]*)" <<<"$out" || fail "no frame of nasd in the backtrace: $out"
  echo "  SIG$sig: status $rc, reported with $(grep -c '^\S*(.*)\[0x' <<<"$out") frames"
done
start_nasd "$T"
expect 200 GET system
echo "crash report: ok"
