#!/bin/bash
# Initiators that never read their replies, and connection floods (issue #11.4): the
# target stops reading from a connection whose queued output is above 16 MiB, bounds
# login PDUs, and caps connections (total, per address, not logged in) with rate-limited
# warnings. Bounds checked here on the target's RSS (plain -O2 build):
#   128 READ(16) of 8 MiB never read        growth < 96 MiB  (was ~1 GiB)
#   discovery NOP-Out pings never read      growth < 64 MiB  (was ~1.4 GiB)
#   login continuation PDUs never read      growth < 16 MiB  (was ~2 GiB)
#   20 sessions x 8 WRITEs of 8 MiB whose last Data-Out never comes
#                                           growth < 320 MiB (was ~1.1 GiB; 256 MiB in all)
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${B:-build}
SERVE=$B/tools/iscsi_serve H=$B/tools/iscsi_hostile
for t in "$SERVE" "$H"; do [ -x "$t" ] || { echo "$t not built"; exit 1; }; done
tmp=$(mktemp -d /tmp/nasd-iscsi-flood.XXXXXX)
pid=; bg=
cleanup() { for p in $pid $bg; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
fail=0
IQN=iqn.2026-12.test.nasd:flood
truncate -s 1G "$tmp/lun0.img"
ok() { printf '%-62s PASS\n' "$1"; }
bad() { printf '%-62s FAIL\n' "$1"; fail=1; }
start() {
    "$SERVE" --portal 127.0.0.1:0 --iqn "$IQN" --file "$tmp/lun0.img" "$@" >"$tmp/serve.out" 2>"$tmp/serve.err" &
    pid=$!
    for _ in $(seq 200); do grep -q '^ready' "$tmp/serve.out" && break; sleep 0.05; done
    port=$(awk '/^ready/ {print $3}' "$tmp/serve.out")
    [ -n "$port" ] || { echo "iscsi_serve did not start"; cat "$tmp/serve.err"; exit 1; }
}
rss() { awk '/^VmRSS/ {print int($2/1024)}' /proc/$pid/status; }   # MiB
peak_during() {  # peak_during SECS: highest RSS sampled every 0.2 s
    local peak=0 r
    for _ in $(seq $(( $1 * 5 ))); do r=$(rss); [ "${r:-0}" -gt $peak ] && peak=$r; sleep 0.2; done
    echo $peak
}
bound() {  # bound NAME BASE PEAK LIMIT
    local g=$(( $3 - $2 ))
    if [ $g -lt $4 ]; then ok "$1: RSS +$g MiB (< $4)"; else bad "$1: RSS +$g MiB (limit $4)"; fi
}
alive() { timeout 30 "$H" reinstate "$port" "$IQN" 1 >/dev/null && ok "target serving ($1)" || bad "target serving ($1)"; }

start
base=$(rss)
"$H" readflood "$port" "$IQN" 6 >"$tmp/rf.out" 2>&1 &
bg=$!
peak=$(peak_during 5)
wait $bg; rc=$?; bg=
cat "$tmp/rf.out"; [ $rc = 0 ] || fail=1
bound "128 READ(16) of 8 MiB, replies unread" "$base" "$peak" 96
alive readflood

base=$(rss)
"$H" nopflood "$port" 5 >"$tmp/nf.out" 2>&1 &
bg=$!
peak=$(peak_during 5)
wait $bg; bg=
cat "$tmp/nf.out"
bound "discovery NOP-Out flood, replies unread" "$base" "$peak" 64
alive nopflood

base=$(rss)
"$H" loginflood "$port" 4 >"$tmp/lf.out" 2>&1 &
bg=$!
peak=$(peak_during 4)
wait $bg; bg=
cat "$tmp/lf.out"
bound "login continuation flood, replies unread" "$base" "$peak" 16
grep -q dropped "$tmp/lf.out" && ok "login flood connection dropped" || bad "login flood connection dropped"
alive loginflood

base=$(rss)
"$H" doutflood "$port" "$IQN" 20 4 >"$tmp/df.out" 2>&1 &
bg=$!
for _ in $(seq 100); do grep -q doutflood "$tmp/df.out" && break; sleep 0.1; done
peak=$(peak_during 3)
wait $bg; bg=
cat "$tmp/df.out"
bound "writes held 7/8 sent (data-out buffers)" "$base" "$peak" 320
grep -q ' [1-9][0-9]* TASK SET FULL' "$tmp/df.out" && ok "writes over the data-out bound get TASK SET FULL" ||
    bad "writes over the data-out bound get TASK SET FULL"
alive doutflood
kill "$pid"; wait "$pid"; pid=

echo "== connection caps (total 50, per address 20, not logged in 30)"
start --max-conns 50 --max-per-addr 20 --max-prelogin 30
CONNS_HOLD=3 "$H" conns "$port" 40 127.0.0.2 >"$tmp/c1.out" &
bg=$!
sleep 1
"$H" conns "$port" 40 127.0.0.3 >"$tmp/c2.out"
wait $bg; bg=
k1=$(awk '{print $5}' "$tmp/c1.out"); k2=$(awk '{print $5}' "$tmp/c2.out")
[ "$k1" = 20 ] && ok "per-address cap: 20 of 40 kept" || bad "per-address cap: $k1 of 40 kept (want 20)"
[ "$k2" = 10 ] && ok "pre-login cap: 10 more of 40 kept" || bad "pre-login cap: $k2 of 40 kept (want 10)"
l0=$(grep -c 'refusing connection' "$tmp/serve.err"); t0=$(date +%s)
for i in 4 5 6 7 8; do "$H" conns "$port" 40 127.0.0.$i >/dev/null; done   # 200 refusals
sleep 0.3
lines=$(( $(grep -c 'refusing connection' "$tmp/serve.err") - l0 )); secs=$(( $(date +%s) - t0 + 1 ))
# util/log allows a burst of 20 lines per call site, then 5 a second
[ "$lines" -le $(( 20 + 5 * secs )) ] && ok "200 refusals logged rate-limited ($lines lines in ${secs} s)" ||
    bad "refusal log not rate-limited ($lines lines in ${secs} s)"
alive caps
CONNS_HOLD=2 "$H" conns "$port" 60 127.0.0.9 >"$tmp/c3.out" &   # idle: dropped by the login timeout only
bg=$!; wait $bg; bg=
sleep 0.5
alive "after the caps were released"

[ $fail = 0 ] && echo "PASS" || echo "FAIL"
exit $fail
