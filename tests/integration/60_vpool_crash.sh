#!/bin/bash
# Pool engine crash safety: a writer process logs every acknowledged-durable write
# (FUA, or buffered + flush, or unmap + flush); we kill -9 it mid-stream several times,
# re-import the pool and verify every acknowledged write is intact. For raidz1 and
# mirror we also verify with a member missing, which only works if parity/copies
# written around the crash are consistent (no write hole).
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${B:-build}
TOOL=$B/tools/vpool_tool
[ -x "$TOOL" ] || { echo "FAIL: missing $TOOL (run make all)"; exit 1; }
TMP=$(mktemp -d /tmp/vpool60.XXXXXX)
WPID=
cleanup() {
    if [ -n "$WPID" ]; then kill -9 "$WPID" 2>/dev/null; wait "$WPID" 2>/dev/null; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

crash_rounds() {   # layout members rounds [lz4]
    local layout=$1 n=$2 rounds=$3 d=$TMP/$1${4:-}
    mkdir -p "$d"
    "$TOOL" create "$d" "$layout" "$n" 48 24 ${4:-} || fail "$layout: create"
    : > "$d/acks"
    for r in $(seq 1 "$rounds"); do
        "$TOOL" writer "$d" "$n" 2 $((r * 1000000000)) > "$d/log.$r" 2> "$d/err.$r" &
        WPID=$!
        sleep "0.$((3 + RANDOM % 6))"
        kill -0 "$WPID" 2>/dev/null || { cat "$d/err.$r"; fail "$layout: writer died on its own"; }
        kill -9 "$WPID"; wait "$WPID" 2>/dev/null; WPID=
        cat "$d/log.$r" >> "$d/acks"
        out=$("$TOOL" verify "$d" "$n" < "$d/acks" 2>&1) || { echo "$out"; fail "$layout round $r: verify"; }
        echo "$layout round $r: $(grep -c "^[AU]" "$d/log.$r") acks this round; $out"
    done
    if [ "$layout" != stripe ]; then
        out=$("$TOOL" verify "$d" "$n" 1 < "$d/acks" 2>&1) || { echo "$out"; fail "$layout: verify without member 1"; }
        echo "$layout without member 1: $out"
        out=$("$TOOL" status "$d" "$n" 2>&1) || { echo "$out"; fail "$layout: not ONLINE after resilver"; }
        # the API's names: "raidz1" is the log-structured pool
        [ "$layout" != raidz1 ] || grep -q "raidz1 (log)" <<<"$out" || fail "$layout: not log-structured: $out"
        out=$("$TOOL" verify "$d" "$n" < "$d/acks" 2>&1) || { echo "$out"; fail "$layout: verify after resilver"; }
        echo "$layout after resilver: $out"
    fi
}

start=$(date +%s)
crash_rounds raidz1-inplace 4 6
crash_rounds raidz1 4 4   # log-structured
crash_rounds mirror 2 3
crash_rounds stripe 2 2
crash_rounds raidz1-inplace 3 2 lz4
crash_rounds raidz1 3 2 lz4
echo "60_vpool_crash: ok in $(( $(date +%s) - start ))s"
