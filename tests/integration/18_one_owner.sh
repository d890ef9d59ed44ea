#!/bin/bash
# #14.1: one owner per state directory, database and pool member.
# - a second nasd on the same --db/--state-dir (the issue's repro) is refused, naming the
#   first one's pid, and A's files written afterwards survive A's restart intact;
# - the same state dir with another DB, and the same DB with another state dir, are refused;
# - a member open in another nasd (import, or create with force), locked by another process
#   or merely open in one is refused with the holder's pid; a member of a pool open here too;
# - a pool whose owner sector heartbeat still advances (another "host", NASD_HOSTID) is not
#   imported unless forced; once the heartbeat stops it imports.
set -u
. "$(dirname "$0")/lib.sh"
command -v nfs-cp >/dev/null || fail "nfs-cp missing (libnfs-utils)"
T=$(mktemp -d /tmp/nasd-it-owner.XXXXXX)
PIDS=()
cleanup() { stop_nasd; for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
mkdir -p "$T/a" "$T/c" "$T/x" "$T/exp"
start_nasd "$T/a"
A_PID=$NASD_PID A_API=$API
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"mirror\",\"members\":[{\"path\":\"$T/m0\",\"size\":\"256M\",\"create\":true},{\"path\":\"$T/m1\",\"size\":\"256M\",\"create\":true}]}"
expect 201 POST datasets '{"pool":"tank","name":"share"}'
api POST exports/nfs '{"dataset":"tank/share","name":"share","clients":["127.0.0.0/8"],"root_squash":false}' >/dev/null
[ "$STATUS" = 201 ] || fail "export: $STATUS $BODY"
URL="nfs://127.0.0.1$(jget "$BODY" .path)"
Q="?nfsport=$NFS_PORT&mountport=$MOUNT_PORT"

# second_nasd DB STATE -> runs a nasd on other ports; it must exit by itself; prints its log
second_nasd() {
  local p1 p2 p3 p4
  p1=$(free_port "$HTTP_PORT" "$ISCSI_PORT" "$NFS_PORT" "$MOUNT_PORT"); p2=$(free_port "$p1" "$HTTP_PORT" "$ISCSI_PORT")
  p3=$(free_port "$p1" "$p2" "$NFS_PORT" "$MOUNT_PORT"); p4=$(free_port "$p1" "$p2" "$p3" "$MOUNT_PORT")
  timeout 10 "$NASD" --listen 127.0.0.1:$p1 --db "$1" --state-dir "$2" --web-dir "$ROOT/web" \
    --iscsi-portal 127.0.0.1:$p2 --nfs-bind 127.0.0.1 --nfs-port $p3 --mount-port $p4 --portmap-port -1 > "$T/second.log" 2>&1
  echo "exit $?"
  cat "$T/second.log"
}
out=$(second_nasd "$T/a/nasd.db" "$T/a")
grep -q '^exit 1$' <<<"$out" || fail "second nasd on the same db and state dir did not exit with 1: $out"
grep -q "in use by another nasd (pid $A_PID)" <<<"$out" || fail "refusal does not name pid $A_PID: $out"
grep -q 'imported' <<<"$out" && fail "the second nasd imported the pool: $out"
echo "same db + state dir: $(grep -o 'start failed.*' <<<"$out")"
out=$(second_nasd "$T/x/other.db" "$T/a")
grep -q "state directory $T/a is in use by another nasd (pid $A_PID)" <<<"$out" || fail "same state dir: $out"
out=$(second_nasd "$T/a/nasd.db" "$T/x")
grep -q "database $T/a/nasd.db is in use by another nasd (pid $A_PID)" <<<"$out" || fail "same db: $out"
echo "same state dir alone / same db alone: refused"

# A's data after the refused second daemon: two 8 MiB files, restart A, read them back
head -c 8M /dev/urandom > "$T/f1"; head -c 8M /dev/urandom > "$T/f2"
for f in f1 f2; do nfs-cp "$T/$f" "$URL/$f$Q" >/dev/null || fail "nfs-cp $f"; done
stop_nasd
HTTP_PORT=${A_API#http://127.0.0.1:}; HTTP_PORT=${HTTP_PORT%/api/v1}
start_nasd "$T/a"
A_PID=$NASD_PID
for f in f1 f2; do
  rm -f "$T/back"; nfs-cp "$URL/$f$Q" "$T/back" >/dev/null || fail "reading $f back after the restart"
  cmp -s "$T/$f" "$T/back" || fail "$f differs after the restart"
done
grep -Eq 'unrecoverable|cannot read the journal' "$T/a/nasd.log" && fail "A's log shows damage"
echo "A's files intact after its restart"

# members open elsewhere
unset HTTP_PORT ISCSI_PORT NFS_PORT MOUNT_PORT
SAVED_PID=$NASD_PID SAVED_API=$API
start_nasd "$T/c"                    # C: another nasd, its own state and db
C_PID=$NASD_PID; PIDS+=("$C_PID")
api POST pools/tank/import "{\"members\":[\"$T/m0\",\"$T/m1\"]}" >/dev/null
[ "$STATUS" = 409 ] || fail "import of a pool open in A: $STATUS $BODY"
jget "$BODY" .error.message | grep -q "process $A_PID" || fail "import refusal does not name A's pid: $BODY"
echo "import in C of A's open pool: $(jget "$BODY" .error.message)"
api POST pools "{\"name\":\"steal\",\"members\":[\"$T/m0\"],\"force\":true}" >/dev/null
[ "$STATUS" = 409 ] && [ "$(jget "$BODY" .force_required)" = false ] || fail "forced create on A's member: $STATUS $BODY"
echo "forced create in C on A's member: $(jget "$BODY" .error.message)"
truncate -s 128M "$T/held.img"
flock -x -o "$T/held.img" sleep 60 & HOLD=$!   # -o: only flock itself holds the lock
PIDS+=("$HOLD")
for _ in $(seq 50); do grep -q "FLOCK.* $HOLD " /proc/locks && break; sleep 0.1; done
api POST pools "{\"name\":\"held\",\"members\":[\"$T/held.img\"]}" >/dev/null
[ "$STATUS" = 409 ] && jget "$BODY" .error.message | grep -q "process $HOLD" || fail "member locked by $HOLD: $STATUS $BODY"
echo "member locked by another process: $(jget "$BODY" .error.message)"
SLEEPER=$(pgrep -P $HOLD); kill $HOLD $SLEEPER; wait $HOLD 2>/dev/null
expect 201 POST pools "{\"name\":\"held\",\"members\":[\"$T/held.img\"]}"
truncate -s 128M "$T/busy.img"
sleep 60 < "$T/busy.img" & BUSY=$!; PIDS+=("$BUSY")   # merely has it open, no lock
api POST pools "{\"name\":\"busy\",\"members\":[\"$T/busy.img\"]}" >/dev/null
[ "$STATUS" = 409 ] && jget "$BODY" .error.message | grep -q "open in process $BUSY (sleep)" || fail "member open in $BUSY: $STATUS $BODY"
echo "member open in another process: $(jget "$BODY" .error.message)"
kill $BUSY; wait $BUSY 2>/dev/null
expect 201 POST pools "{\"name\":\"busy\",\"members\":[\"$T/busy.img\"]}"
kill -TERM $C_PID; wait $C_PID 2>/dev/null
NASD_PID=$SAVED_PID API=$SAVED_API
ln -s "$T/m1" "$T/m1-link"
api POST pools "{\"name\":\"twice\",\"members\":[\"$T/m1-link\"],\"force\":true}" >/dev/null
[ "$STATUS" = 409 ] || fail "a member of a pool open here, by another name: $STATUS $BODY"
echo "member of a pool open here: $(jget "$BODY" .error.message)"

# another host's heartbeat on a shared disk
"$ROOT/build/tools/vpool_tool" create "$T/exp" mirror 2 64 8 >/dev/null || fail "vpool_tool create"
NASD_HOSTID=0x5eed "$ROOT/build/tools/owner_beat" "$T/exp/m0" "$T/exp/m1" > "$T/beat.out" & BEAT=$!; PIDS+=("$BEAT")
for _ in $(seq 50); do grep -q beating "$T/beat.out" 2>/dev/null && break; sleep 0.1; done
api POST pools/crash/import "{\"members\":[\"$T/exp/m0\",\"$T/exp/m1\"]}" >/dev/null
[ "$STATUS" = 409 ] && jget "$BODY" .error.message | grep -q heartbeat || fail "import with a live remote owner: $STATUS $BODY"
echo "live remote owner: $(jget "$BODY" .error.message)"
kill $BEAT; wait $BEAT 2>/dev/null
expect 201 POST pools/crash/import "{\"members\":[\"$T/exp/m0\",\"$T/exp/m1\"]}"
echo "heartbeat stopped: import works"
echo "PASS: one owner per state dir, database and member"
