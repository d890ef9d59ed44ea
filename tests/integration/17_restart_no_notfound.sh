#!/bin/bash
# #10.7a: after kill -9 and a restart, the iSCSI portal and the NFS server never answer
# "target not found" / NOENT for exports that exist: they accept connections only once pools
# and exports are restored. iscsi-inq and nfs-ls poll every 10 ms from the restart on; before
# the first accepted connection a refused connection is fine, after it every answer must be good.
set -u
. "$(dirname "$0")/lib.sh"
command -v iscsi-inq >/dev/null && command -v nfs-ls >/dev/null || fail "iscsi-inq / nfs-ls missing (libiscsi-bin, libnfs-utils)"
T=$(mktemp -d /tmp/nasd-it-restart.XXXXXX)
trap 'stop_nasd; kill $IP $NP 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
IP= NP=
start_nasd "$T"
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"mirror\",\"members\":[{\"path\":\"$T/d0.img\",\"size\":\"256M\",\"create\":true},{\"path\":\"$T/d1.img\",\"size\":\"256M\",\"create\":true}]}"
expect 201 POST volumes '{"pool":"tank","name":"vol","size":"32M"}'
api POST exports/iscsi '{"name":"t1","volume":"tank/vol"}' >/dev/null
[ "$STATUS" = 201 ] || fail "iscsi export: $STATUS $BODY"
IQN=$(jget "$BODY" .iqn)
# datasets make the restore take a while (each filesystem is opened and its journal replayed)
for i in 1 2 3 4 5 6; do
  expect 201 POST datasets "{\"pool\":\"tank\",\"name\":\"ds$i\"}"
  api POST exports/nfs "{\"dataset\":\"tank/ds$i\",\"name\":\"ds$i\",\"clients\":[\"127.0.0.0/8\"]}" >/dev/null
  [ "$STATUS" = 201 ] || fail "nfs export: $STATUS $BODY"
done
EPATH=$(jget "$BODY" .path)
# more pools to open before any export can be served: a wider window for the old order
for i in 1 2 3 4; do
  expect 201 POST pools "{\"name\":\"extra$i\",\"members\":[{\"path\":\"$T/e$i.img\",\"size\":\"2G\",\"create\":true}]}"
done
ISCSI_URL="iscsi://127.0.0.1:$ISCSI_PORT/$IQN/0"
NFS_URL="nfs://127.0.0.1$EPATH?nfsport=$NFS_PORT&mountport=$MOUNT_PORT"
iscsi-inq "$ISCSI_URL" >/dev/null 2>&1 || fail "iscsi-inq before the restart"
nfs-ls "$NFS_URL" >/dev/null 2>&1 || fail "nfs-ls before the restart"

# poll CMD URL LOG: one line per attempt, "ok", "refused" (not accepting yet) or the error
poll() {
  local cmd=$1 url=$2 log=$3 out
  for _ in $(seq 600); do
    if out=$(timeout 5 "$cmd" "$url" 2>&1); then echo ok; else
      # libiscsi/libnfs report a refused TCP connect as a failed (re)connect of the service
      case $out in *"ot found"*|*NOENT*|*STALE*) echo "ERR: $(tr '\n' ' ' <<<"$out")";;
                   *"onnection refused"*|*"reconnect"*|*"nfs_service failed"*) echo refused;;
                   *) echo "ERR: $(tr '\n' ' ' <<<"$out")";; esac
    fi
    sleep 0.01
  done > "$log"
}

for round in 1 2 3; do
  kill -KILL $NASD_PID; wait $NASD_PID 2>/dev/null
  poll iscsi-inq "$ISCSI_URL" "$T/iscsi.$round" & IP=$!
  poll nfs-ls "$NFS_URL" "$T/nfs.$round" & NP=$!
  start_nasd "$T"
  sleep 1.5
  kill $IP $NP 2>/dev/null; wait $IP $NP 2>/dev/null; IP= NP=
  for p in iscsi nfs; do
    f="$T/$p.$round"
    first=$(grep -n -m1 -v '^refused$' "$f" | cut -d: -f1)
    [ -n "$first" ] || fail "round $round: $p never answered: $(sort "$f" | uniq -c)"
    bad=$(tail -n +"$first" "$f" | grep -v '^ok$' | sort | uniq -c)
    [ -z "$bad" ] || fail "round $round: $p answered with errors after accepting connections: $bad"
    echo "round $round: $p: $(head -n $((first - 1)) "$f" | wc -l) refused, then $(tail -n +"$first" "$f" | wc -l) good answers"
  done
done
echo "PASS: no 'not found' for existing exports after kill -9 and restart"
