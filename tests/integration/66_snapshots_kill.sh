#!/bin/bash
# kill -9 while a snapshot is created, deleted or rolled back to: after a restart the
# pool is ONLINE, each snapshot that exists reads exactly what the volume held when it
# was taken, the volume reads either its old content or the snapshot's (rollback), and
# no space leaks (deleting every snapshot leaves just the volume's units).
set -u
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-snapkill.XXXXXX)
PAT=$ROOT/build/tools/iscsi_pattern
trap 'stop_nasd; rm -rf "$T"' EXIT
IQN=iqn.2026-12.io.nasd
start_nasd "$T"
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"${LAYOUT:-raidz1-inplace}\",\"members\":[
  {\"path\":\"$T/d0.img\",\"size\":\"128M\",\"create\":true},{\"path\":\"$T/d1.img\",\"size\":\"128M\",\"create\":true},
  {\"path\":\"$T/d2.img\",\"size\":\"128M\",\"create\":true}]}"
[ "$(api GET pools/tank | jq -r .layout)" = "${LAYOUT:-raidz1-inplace}" ] || fail "layout of tank"
expect 201 POST volumes '{"pool":"tank","name":"v","size":"16M"}'
expect 201 POST exports/iscsi '{"name":"v","volume":"tank/v"}'
URL=iscsi://127.0.0.1:$ISCSI_PORT/$IQN:v/0
declare -A SEED   # snapshot -> pattern seed it must hold
cur=0             # seed the volume holds

kill_during() {   # kill_during METHOD PATH JSON: starts the call, kills nasd 0-40 ms later
  curl -s -o /dev/null -X "$1" -H 'Content-Type: application/json' --data "$3" "$API/$2" &
  local c=$!
  sleep "0.0$((RANDOM % 5))$((RANDOM % 10))"
  kill -9 $NASD_PID; wait $NASD_PID 2>/dev/null; NASD_PID=
  wait $c 2>/dev/null
  start_nasd "$T"
  [ "$(api GET pools/tank | jq -r .state)" = ONLINE ] || fail "pool not ONLINE after kill -9 during $1 $2: $BODY"
}

check_all() {     # every snapshot reads its seed, the volume one of the allowed seeds
  api GET volumes/tank/v/snapshots >/dev/null
  local names; names=$(jget "$BODY" '.[].name')
  for s in $names; do
    [ -n "${SEED[$s]:-}" ] || fail "unknown snapshot $s appeared"
    expect 201 POST exports/iscsi "{\"name\":\"chk\",\"luns\":[{\"lun\":0,\"volume\":\"tank/v\",\"snapshot\":\"$s\"}]}"
    $PAT verify "iscsi://127.0.0.1:$ISCSI_PORT/$IQN:chk/0" "${SEED[$s]}" 16 >/dev/null || fail "snapshot $s is not seed ${SEED[$s]}"
    expect 204 DELETE exports/iscsi/chk
  done
  for s in "${!SEED[@]}"; do [[ " $(echo $names) " == *" $s "* ]] || unset "SEED[$s]"; done
  local ok=
  for want in "$@"; do $PAT verify "$URL" "$want" 16 >/dev/null 2>&1 && { ok=$want; break; }; done
  [ -n "$ok" ] || fail "volume holds none of seeds $*"
  cur=$ok
}

lost=0
for i in 1 2 3 4; do
  $PAT write "$URL" $((10 + i)) 16 >/dev/null || fail "write seed $((10 + i))"
  cur=$((10 + i))
  SEED[k$i]=$cur
  kill_during POST volumes/tank/v/snapshots "{\"name\":\"k$i\"}"
  check_all $cur
  [ -n "${SEED[k$i]:-}" ] || lost=$((lost + 1))
  if [ $i -ge 3 ]; then   # delete an older one
    old=$(api GET volumes/tank/v/snapshots | jq -r '.[0].name')
    kill_during DELETE "volumes/tank/v/snapshots/$old" ''
    check_all $cur
  fi
  $PAT write "$URL" $((30 + i)) 16 >/dev/null || fail "write seed $((30 + i))"
  cur=$((30 + i))
  newest=$(api GET volumes/tank/v/snapshots | jq -r '.[-1].name // empty')
  if [ -n "$newest" ]; then
    kill_during POST "volumes/tank/v/snapshots/$newest/rollback" '{"force":true}'
    check_all $((30 + i)) "${SEED[$newest]}"
  fi
done
echo "creates cut short by the kill: $lost of 4; snapshots left: $(api GET volumes/tank/v/snapshots | jq -r '[.[].name] | join(" ")')"
expect 202 POST pools/tank/scrub
for _ in $(seq 100); do [ "$(api GET pools/tank/scrub | jq -r .scrub.running)" = false ] && break; sleep 0.1; done
for s in $(api GET volumes/tank/v/snapshots | jq -r '.[].name'); do expect 204 DELETE "volumes/tank/v/snapshots/$s"; done
api GET pools/tank >/dev/null
[ "$(jget "$BODY" .allocated)" -eq $((16 << 20)) ] || fail "space leaked: allocated $(jget "$BODY" .allocated) for a 16 MiB volume"
[ "$(jget "$BODY" .unrepairable)" = 0 ] || fail "unrepairable errors: $BODY"
$PAT verify "$URL" $cur 16 >/dev/null || fail "volume after deleting every snapshot"
echo "snapshots under kill -9: ok"
