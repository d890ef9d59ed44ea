#!/bin/bash
# Runs Check unit test binaries (args) and tests/integration/*.sh; prints one closing tally.
# UNIT_ONLY=1 / INTEGRATION_ONLY=1 restrict; TESTS="pattern ..." runs the integration scripts
# whose name contains any of the patterns (13_ uses one that matches none to build only).
# Scripts with a line "# lane: side" run one after another in a second lane beside the others:
# they mostly wait (libiscsi's iscsi-test-cu sleeps 3 s in each reset and CmdSN test), so the
# suite takes minutes less on 2 cores. Their output is printed when the main lane is done.
cd "$(dirname "$0")/.." || exit 1
pass=0; fail=0; failed=()
# Each test's output is also kept, and the end of a failing one is printed again just above the
# tally: CI shows only the last part of the output, which must say why a test failed.
logs=$(mktemp -d /tmp/nasd-test-logs.XXXXXX)
side_pid=
trap '[ -n "$side_pid" ] && kill "$side_pid" 2>/dev/null; rm -rf "$logs"' EXIT
run_logged() {   # name timeout cmd...: runs cmd, output to the terminal and to a log
  local name=$1 limit=$2; shift 2
  # not a pipe into tee: a server a test leaves behind would keep it open and hold the run
  # in braces: the shell itself starts tee then, so $! is tee (not the side lane's job)
  { timeout "$limit" "$@"; } > >(tee "$logs/$name.log") 2>&1
  local rc=$? tee_pid=$!
  # tee's last lines, before the next test or the tail below (at most 5 s: such a server
  # may hold tee open)
  for _ in $(seq 250); do kill -0 "$tee_pid" 2>/dev/null || break; sleep 0.02; done
  [ "$rc" -eq 124 ] && echo "(killed after ${limit} s: timed out)" | tee -a "$logs/$name.log"
  return "$rc"
}
if [ -z "$INTEGRATION_ONLY" ]; then
  echo "== layout"   # folder include cycles, header comments
  if scripts/check-layout.sh; then pass=$((pass+1)); else fail=$((fail+1)); failed+=(layout); fi
  # Unit binaries run side by side, UNIT_LANES at a time (3): the pool engine's spend most
  # of their time waiting on fsync, so on 2 cores three lanes take about half as long as
  # one. Started last to first, so those slow ones (test_vpool_*) begin at once; the outputs
  # are printed in order when all are done. UNIT_TIMEOUT: seconds per program (300).
  units=("$@") names=() limit=${UNIT_TIMEOUT:-300}
  for t in "${units[@]}"; do
    name=$(basename "$t"); [[ "$t" == *asan/* ]] && name="$name.asan"   # mk/asan.mk's ASAN_UNITS
    names+=("$name")
  done
  [ ${#units[@]} -gt 0 ] && echo "== unit: ${#units[@]} test programs, ${UNIT_LANES:-3} at a time"
  for (( i = ${#units[@]} - 1; i >= 0; i-- )); do
    while [ "$(jobs -rp | wc -l)" -ge "${UNIT_LANES:-3}" ]; do wait -n; done
    { timeout "$limit" "${units[i]}" >"$logs/${names[i]}.log" 2>&1; echo $? >"$logs/${names[i]}.rc"; } &
  done
  wait
  for i in "${!units[@]}"; do
    name=${names[i]}
    echo "== unit $name"
    cat "$logs/$name.log"
    rc=$(cat "$logs/$name.rc" 2>/dev/null || echo 1)
    [ "$rc" -eq 124 ] && echo "(killed after $limit s: timed out)" | tee -a "$logs/$name.log"
    if [ "$rc" -eq 0 ]; then pass=$((pass+1)); else fail=$((fail+1)); failed+=("$name"); fi
  done
fi
side_lane() {   # scripts...: one after another, output only to their logs; one result line each
  local t start r
  for t; do
    start=$(date +%s)
    if timeout 900 bash "$t" >"$logs/$(basename "$t").log" 2>&1; then r=ok; else r=FAIL; fi
    echo "$t $r $(( $(date +%s) - start ))" >>"$logs/side.results"
  done
}
if [ -z "$UNIT_ONLY" ]; then
  main=(); side=()
  for t in tests/integration/[0-9]*.sh; do
    [ -e "$t" ] || continue
    if [ -n "$TESTS" ]; then
      hit=
      for pat in $TESTS; do [[ "$t" == *"$pat"* ]] && hit=1; done
      [ -n "$hit" ] || continue
    fi
    if grep -q '^# lane: side$' "$t"; then side+=("$t"); else main+=("$t"); fi
  done
  if [ ${#side[@]} -gt 0 ]; then
    echo "== side lane (output below, after the main lane): $(basename -a "${side[@]}" | tr '\n' ' ')"
    : >"$logs/side.results"
    side_lane "${side[@]}" & side_pid=$!
  fi
  for t in "${main[@]}"; do
    echo "== integration $(basename "$t")"
    start=$(date +%s)
    if run_logged "$(basename "$t")" 900 bash "$t"; then pass=$((pass+1)); r=ok; else fail=$((fail+1)); failed+=("$t"); r=FAIL; fi
    echo "-- $(basename "$t"): $r in $(( $(date +%s) - start ))s"
  done
  if [ -n "$side_pid" ]; then
    wait "$side_pid"
    while read -r t r secs; do
      echo "== integration $(basename "$t") (side lane)"
      cat "$logs/$(basename "$t").log"
      [ "$r" = ok ] && pass=$((pass+1)) || { fail=$((fail+1)); failed+=("$t"); }
      echo "-- $(basename "$t"): $r in ${secs}s (side lane)"
    done <"$logs/side.results"
    # a script that never wrote its result line (the lane was killed) counts as failed
    for t in "${side[@]}"; do
      grep -q "^$t " "$logs/side.results" || { fail=$((fail+1)); failed+=("$t"); echo "-- $(basename "$t"): no result (side lane)"; }
    done
  fi
  if [ -n "$TESTS" ] && [ $(( ${#main[@]} + ${#side[@]} )) -eq 0 ]; then
    echo "note: TESTS=\"$TESTS\" matches no script in tests/integration: none ran"
  fi
fi
for t in "${failed[@]}"; do
  [ -f "$logs/$(basename "$t").log" ] || continue
  echo; echo "---- last lines of $(basename "$t")"
  tail -n 40 "$logs/$(basename "$t").log"
done
echo
[ ${#failed[@]} -gt 0 ] && printf 'FAILED: %s\n' "${failed[@]}"
echo "tests: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
