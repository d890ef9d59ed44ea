# Shared helpers for integration tests (source it). Loopback and high ports only.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NASD=${NASD:-$ROOT/build/nasd}

# use_asan_build: hostile-input tests call this to run the ASan+UBSan build (make asan,
# part of make test) when it exists: sets B (tools) and NASD; a sanitizer report aborts
# the server, so the test fails. B or NASD set by the caller win.
use_asan_build() {
  local ba=$ROOT/${BA:-build-asan}
  [ -x "$ba/nasd" ] || { echo "note: no ASan build ($ba), using the plain one"; return 0; }
  B=${B:-$ba}
  [ "$NASD" = "$ROOT/build/nasd" ] && NASD=$ba/nasd
  export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  echo "using the ASan+UBSan build in $B"
}

# fail MSG: the test fails; when it started nasd, says whether nasd still runs and shows
# the end of its log (CI keeps only this output: a crash shows there, not in a lost file)
fail() {
  echo "FAIL: $*" >&2
  if [ -n "${NASD_LOG:-}" ] && [ -f "$NASD_LOG" ]; then
    [ -n "${NASD_PID:-}" ] && ! kill -0 "$NASD_PID" 2>/dev/null && echo "nasd (pid $NASD_PID) is not running" >&2
    echo "---- last lines of $NASD_LOG" >&2
    tail -n 40 "$NASD_LOG" >&2
  fi
  exit 1
}

. "$(dirname "${BASH_SOURCE[0]}")/../ports.sh"

# run_on_layout LAYOUT NAME...: runs the integration scripts NAME.sh (beside this file),
# each of which takes its pool layout from LAYOUT, on that layout, one after the other
run_on_layout() {
  local layout=$1 t; shift
  for t; do
    echo "== $t on $layout"
    LAYOUT=$layout "$(dirname "${BASH_SOURCE[0]}")/$t.sh" || fail "$t on $layout"
  done
}
# A TCP port nobody listens on, from the tests' range (tests/ports.sh); ports given as
# arguments (already picked by the caller) are never returned.
free_port() {
  local p PORTS_FROM PORTS_TO
  ports_range
  for _ in $(seq 200); do
    p=$(( PORTS_FROM + RANDOM % (PORTS_TO - PORTS_FROM) ))
    [[ " $* " == *" $p "* ]] && continue
    (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; return; }
  done
  fail "no free port"
}

# start_nasd DIR: starts nasd on free ports with state in DIR; sets NASD_PID, API, HTTP_PORT,
# ISCSI_PORT, NFS_PORT, MOUNT_PORT. Extra args are passed to nasd. Ports chosen here are
# re-drawn if another process took one between the probe and the bind.
start_nasd() {
  local dir=$1; shift
  local fixed=${HTTP_PORT:-}
  for attempt in 1 2 3 4 5; do
    HTTP_PORT=${fixed:-${HTTP_PORT:-$(free_port)}}
    ISCSI_PORT=${ISCSI_PORT:-$(free_port)}
    NFS_PORT=${NFS_PORT:-$(free_port)}
    MOUNT_PORT=${MOUNT_PORT:-$(free_port)}
    API=http://127.0.0.1:$HTTP_PORT/api/v1
    NASD_LOG=$dir/nasd.log
    local logpos=$(stat -c %s "$dir/nasd.log" 2>/dev/null || echo 0)
    "$NASD" --listen 127.0.0.1:$HTTP_PORT --db "$dir/nasd.db" --state-dir "$dir" --web-dir "$ROOT/web" \
      --iscsi-portal 127.0.0.1:$ISCSI_PORT --nfs-bind 127.0.0.1 --nfs-port $NFS_PORT --mount-port $MOUNT_PORT \
      --portmap-port -1 "$@" >>"$dir/nasd.log" 2>&1 &
    NASD_PID=$!
    for _ in $(seq 100); do
      case $(curl -s -o /dev/null -w '%{http_code}' "$API/system" 2>/dev/null) in 200|401) return 0;; esac
      kill -0 $NASD_PID 2>/dev/null || break
      sleep 0.1
    done
    if ! kill -0 $NASD_PID 2>/dev/null && [ -z "$fixed" ] &&
       tail -c +$((logpos + 1)) "$dir/nasd.log" | grep -q "Address already in use"; then
      unset HTTP_PORT ISCSI_PORT NFS_PORT MOUNT_PORT   # lost a port race: draw new ports
      wait $NASD_PID 2>/dev/null
      continue
    fi
    break
  done
  cat "$dir/nasd.log" >&2
  kill -0 $NASD_PID 2>/dev/null && fail "nasd did not come up" || fail "nasd exited at start"
}

stop_nasd() {
  [ -n "${NASD_PID:-}" ] || return 0
  kill -TERM $NASD_PID 2>/dev/null
  for _ in $(seq 50); do kill -0 $NASD_PID 2>/dev/null || break; sleep 0.1; done
  kill -KILL $NASD_PID 2>/dev/null
  wait $NASD_PID 2>/dev/null
  NASD_PID=
}

# api METHOD PATH [JSON] -> prints body; sets STATUS. POST/PATCH always say JSON (nasd
# refuses a state-changing POST without it, as a cross-site form would send).
api() {
  local out ct=
  case $1 in POST|PATCH) ct='Content-Type: application/json';; esac
  out=$(curl -s -w '\n%{http_code}' -X "$1" ${ct:+-H "$ct"} ${3:+--data "$3"} "$API/$2")
  STATUS=${out##*$'\n'}
  BODY=${out%$'\n'*}
  printf '%s' "$BODY"
}

# expect STATUS METHOD PATH [JSON]
expect() {
  local want=$1; shift
  api "$@" >/dev/null
  [ "$STATUS" = "$want" ] || fail "$1 $2 -> $STATUS (want $want): $BODY"
}

# jget JSON FILTER — jq filter on a JSON string (jq is installed by scripts/deps.sh)
jget() { printf '%s' "$1" | jq -r "$2"; }

# run_iscsi_test_cu URL LOG [EXPECTED]: libiscsi's conformance suite, destructive, every
# test, with URL twice so the multipath tests run; prints the summary; non-zero if any test
# FAILED, or with EXPECTED (test names), if any other test failed or one of them passed.
run_iscsi_test_cu() {
  local url=$1 log=$2 expected=${3:-} start rc summary failed total names
  command -v iscsi-test-cu >/dev/null || { echo "iscsi-test-cu not installed (libiscsi-bin)"; return 1; }
  start=$(date +%s)
  timeout 600 iscsi-test-cu --dataloss --normal "$url" "$url" >"$log" 2>&1
  rc=$?
  echo "iscsi-test-cu finished in $(( $(date +%s) - start ))s (exit $rc)"
  grep -a -A4 'Run Summary' "$log"
  echo "skip notices: $(grep -a -c '\[SKIPPED\]' "$log") (unsupported optional commands, removable-media and sanitize tests)"
  summary=$(grep -a -E '^ +tests +[0-9]+' "$log")
  failed=$(awk '{print $5}' <<<"$summary")
  total=$(awk '{print $2}' <<<"$summary")
  # exit 1: some test failed (judged below); anything else is abnormal
  if [ -z "$summary" ] || { [ "$rc" -ne 0 ] && { [ -z "$expected" ] || [ "$rc" -ne 1 ]; }; }; then
    echo "FAIL: no summary / abnormal exit"; tail -40 "$log"; return 1
  fi
  if [ -n "$expected" ]; then
    names=$(grep -a -o 'Test [A-Za-z0-9_]* had failures' "$log" | awk '{print $2}' | sort -u | tr '\n' ' ')
    local pat=" (${expected// /|}) had failures"
    # every failure report (a suite's set-up too) must be one of the expected tests
    if [ "${names% }" != "$expected" ] || grep -a 'had failures' "$log" | grep -a -q -v -E "Test$pat"; then
      echo "FAIL: expected exactly [$expected] to fail, failed: [${names% }]"
      grep -a -A8 'had failures' "$log" | head -80
      return 1
    fi
    echo "PASS: $total tests, failed only the expected [$expected]"
    return 0
  fi
  if [ "$failed" != 0 ]; then
    echo "FAIL: $failed of $total tests failed:"
    grep -a 'had failures' "$log" | sort | uniq -c
    grep -a -A8 'had failures' "$log" | head -80
    return 1
  fi
  echo "PASS: $total tests, 0 failed"
}

# nfs_serve_up DIR ARGS...: starts $SERVE (the nfs_serve harness) with ARGS, stdout in DIR/out
# and stderr in DIR/log; sets PID; fails unless it reports "ready".
nfs_serve_up() {
  local dir=$1; shift
  : > "$dir/out"
  "$SERVE" "$@" > "$dir/out" 2> "$dir/log" &
  PID=$!
  for _ in $(seq 200); do
    grep -q '^ready' "$dir/out" && return 0
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.05
  done
  fail "nfs_serve did not start ($*)"
}

# nfs_serve_down: stops it with SIGTERM; it must exit cleanly.
nfs_serve_down() {
  kill "$PID" && wait "$PID"
  local rc=$?
  PID=
  [ $rc -eq 0 ] || fail "nfs_serve exited with $rc"
}
