#!/bin/bash
# API tokens: with auth on, /api/v1 and /metrics need "Authorization: Bearer <token>";
# tokens come from `nasd --create-token` or POST /api/v1/tokens, and DELETE revokes them.
# The static UI stays public (it asks for a token).
set -u
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d /tmp/nasd-it-auth.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
TOK=$("$NASD" --db "$T/nasd.db" --create-token ci) || fail "--create-token"
[ ${#TOK} = 64 ] || fail "token has ${#TOK} characters"
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
start_nasd "$T" --auth --iscsi-portal "" --nfs-bind ""
[ "$(code "$API/pools")" = 401 ] || fail "no token accepted"
[ "$(code -H "Authorization: Bearer $(printf '0%.0s' $(seq 64))" "$API/pools")" = 401 ] || fail "wrong token accepted"
[ "$(code -H "Authorization: Basic abc" "$API/pools")" = 401 ] || fail "Basic accepted"
[ "$(code "http://127.0.0.1:$HTTP_PORT/metrics")" = 401 ] || fail "/metrics open"
# OPTIONS told which objects exist (404 for a missing volume, 405 for one there)
[ "$(code -X OPTIONS "$API/volumes/tank/nosuch/snapshots/x")" = 401 ] || fail "OPTIONS without a token answered"
[ "$(code -X OPTIONS -H "Authorization: Bearer $TOK" "$API/pools")" = 204 ] || fail "OPTIONS with a token"
curl -s -D - -o /dev/null "$API/pools" | grep -qi '^WWW-Authenticate: Bearer' || fail "no WWW-Authenticate"
[ "$(code "http://127.0.0.1:$HTTP_PORT/")" = 200 ] || fail "UI not served without a token"
[ "$(code -H "Authorization: Bearer $TOK" "$API/pools")" = 200 ] || fail "good token refused"
[ "$(code -H "Authorization: Bearer $TOK" "http://127.0.0.1:$HTTP_PORT/metrics")" = 200 ] || fail "/metrics with token"
out=$(curl -s -H "Authorization: Bearer $TOK" -H 'Content-Type: application/json' -d '{"description":"second"}' "$API/tokens")
T2=$(jq -r .token <<<"$out"); ID2=$(jq -r .id <<<"$out")
[ ${#T2} = 64 ] || fail "POST /tokens: $out"
curl -s -H "Authorization: Bearer $TOK" "$API/tokens" | jq -e 'map(.description) == ["ci","second"] and (map(has("token") or has("token_hash")) | any | not)' >/dev/null \
  || fail "token list wrong or leaks secrets"
[ "$(code -H "Authorization: Bearer $T2" "$API/system")" = 200 ] || fail "second token refused"
[ "$(code -X DELETE -H "Authorization: Bearer $TOK" "$API/tokens/$ID2")" = 204 ] || fail "revoke"
[ "$(code -H "Authorization: Bearer $T2" "$API/system")" = 401 ] || fail "revoked token still works"
[ "$(code -H "Authorization: Bearer $TOK" "$API/system")" = 200 ] || fail "first token lost"
echo "auth: ok"
