#!/bin/bash
# iSCSI discovery (issue #11): SendTargets lists only targets the client could log in
# to (initiator list, CHAP), and discovery CHAP set over REST (system/settings) is
# required once configured, persisted across a restart, and never shows its secrets.
set -u
. "$(dirname "$0")/lib.sh"
command -v iscsi-ls >/dev/null || fail "iscsi-ls not installed (libiscsi-bin)"
T=$(mktemp -d /tmp/nasd-it-disc.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
start_nasd "$T"
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"stripe\",\"members\":[{\"path\":\"$T/d0.img\",\"size\":\"256M\",\"create\":true}]}"
for v in v1 v2 v3; do expect 201 POST volumes "{\"pool\":\"tank\",\"name\":\"$v\",\"size\":\"16M\"}"; done
expect 201 POST exports/iscsi '{"name":"open","volume":"tank/v1"}'
expect 201 POST exports/iscsi '{"name":"secret","volume":"tank/v2","chap_user":"alice","chap_secret":"alicesecret12"}'
expect 201 POST exports/iscsi '{"name":"acl","volume":"tank/v3","initiators":["iqn.2026-12.test:friend"]}'
P=127.0.0.1:$ISCSI_PORT
Q=iqn.2026-12.io.nasd
ls_as() {  # ls_as NAME WANT_RC URL [-i INITIATOR] ; sets OUT
    local name=$1 want=$2 url=$3; shift 3
    OUT=$(timeout 20 iscsi-ls "$@" "$url" 2>&1); local rc=$?
    if { [ "$want" = 0 ] && [ $rc != 0 ]; } || { [ "$want" != 0 ] && [ $rc = 0 ]; }; then
        echo "$OUT"; fail "$name: iscsi-ls exit $rc"
    fi
}
has() { grep -q "$Q:$1" <<<"$OUT"; }
check() {  # check NAME WANT_LIST(open,secret,acl as 1/0)
    local name=$1 o=$2 s=$3 a=$4
    for t in open:$o secret:$s acl:$a; do
        if has "${t%:*}"; then [ "${t#*:}" = 1 ] || { echo "$OUT"; fail "$name: lists ${t%:*}"; }
        else [ "${t#*:}" = 0 ] || { echo "$OUT"; fail "$name: does not list ${t%:*}"; }; fi
    done
    printf '%-62s PASS\n' "$name"
}

ls_as "anonymous" 0 "iscsi://$P" -i iqn.2026-12.test:stranger
check "discovery without CHAP: open target only" 1 0 0
ls_as "friend" 0 "iscsi://$P" -i iqn.2026-12.test:friend
check "initiator on a target's list sees it" 1 0 1
ls_as "alice" 0 "iscsi://alice%alicesecret12@$P" -i iqn.2026-12.test:stranger
check "discovery with a target's CHAP credentials sees that target" 1 1 0
ls_as "wrong secret" 1 "iscsi://alice%wrongsecret12@$P" -i iqn.2026-12.test:stranger
printf '%-62s PASS\n' "discovery with a wrong CHAP secret fails"

echo "== discovery CHAP required"
expect 400 PATCH system/settings '{"iscsi_discovery_chap_user":"disc","iscsi_discovery_chap_secret":"short"}'
expect 200 PATCH system/settings '{"iscsi_discovery_chap_user":"disc","iscsi_discovery_chap_secret":"discsecret123"}'
[ "$(jget "$BODY" .iscsi_discovery_auth)" = chap ] || fail "settings: $BODY"
grep -q discsecret123 <<<"$BODY" && fail "settings show the secret: $BODY"
ls_as "anonymous, CHAP required" 1 "iscsi://$P" -i iqn.2026-12.test:stranger
printf '%-62s PASS\n' "discovery without credentials refused"
ls_as "disc creds" 0 "iscsi://disc%discsecret123@$P" -i iqn.2026-12.test:stranger
check "discovery credentials list every target the ACLs allow" 1 1 0
ls_as "alice, CHAP required" 0 "iscsi://alice%alicesecret12@$P" -i iqn.2026-12.test:stranger
check "a target's credentials still list that target" 1 1 0
iscsi-inq "iscsi://$P/$Q:open/0" >/dev/null || fail "normal login to the open target"
printf '%-62s PASS\n' "normal sessions are not affected"

echo "== persisted"
stop_nasd
start_nasd "$T"
api GET system/settings >/dev/null
[ "$(jget "$BODY" .iscsi_discovery_chap_user)" = disc ] || fail "after restart: $BODY"
ls_as "anonymous after restart" 1 "iscsi://$P" -i iqn.2026-12.test:stranger
printf '%-62s PASS\n' "discovery CHAP still required after a restart"
expect 200 PATCH system/settings '{"iscsi_discovery_chap_user":""}'
[ "$(jget "$BODY" .iscsi_discovery_auth)" = none ] || fail "cleared: $BODY"
ls_as "anonymous after clearing" 0 "iscsi://$P" -i iqn.2026-12.test:stranger
check "discovery open again once cleared" 1 0 0
echo PASS
