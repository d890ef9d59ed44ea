#!/bin/bash
# Stress (issue #11): 300 concurrent hostile iSCSI initiators for 20 s against the nasd
# daemon (tools/iscsi_hostile stress: garbage then FIN/RST, logins whose 8 MiB READs are
# never read, reinstatements over a few shared ISIDs, discovery, half PDUs then RST),
# from 50 loopback addresses. Bounds: REST answers every probe (2 s timeout) throughout,
# RSS grows by less than 512 MiB (queued output is bounded at 128 MiB in all; the rest is
# READ buffers in flight and what glibc's per-thread arenas of the daemon's workers keep
# after free; measured peaks +280..+360 MiB, was +1.9 GiB without the global bound),
# descriptors return to the baseline within 20 s, and a normal initiator is served afterwards.
set -u
. "$(dirname "$0")/lib.sh"
H=$ROOT/build/tools/iscsi_hostile
[ -x "$H" ] || fail "$H not built"
T=$(mktemp -d /tmp/nasd-it-stress.XXXXXX)
spid=
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; stop_nasd; rm -rf "$T"' EXIT
start_nasd "$T"
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"stripe\",\"members\":[{\"path\":\"$T/d0.img\",\"size\":\"256M\",\"create\":true}]}"
expect 201 POST volumes '{"pool":"tank","name":"lun0","size":"128M"}'
expect 201 POST exports/iscsi '{"name":"stress","volume":"tank/lun0"}'
IQN=iqn.2026-12.io.nasd:stress
URL="iscsi://127.0.0.1:$ISCSI_PORT/$IQN/0"
iscsi-inq "$URL" >/dev/null || fail "baseline iscsi-inq"
fds() { ls /proc/$NASD_PID/fd | wc -l; }
# the daemon's own memory (RssAnon): the pool's member mappings count in VmRSS as file pages
rss() { awk '/^RssAnon/ {print int($2/1024)}' /proc/$NASD_PID/status; }
sleep 1
fd0=$(fds); rss0=$(rss)
echo "baseline: $fd0 descriptors, RSS $rss0 MiB"

"$H" stress "$ISCSI_PORT" "$IQN" 20 300 >"$T/stress.out" 2>&1 &
spid=$!
probes=0 slow=0 peak=$rss0 fdpeak=$fd0
while kill -0 $spid 2>/dev/null; do
    code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "$API/system")
    probes=$((probes + 1))
    [ "$code" = 200 ] || { slow=$((slow + 1)); echo "REST probe $probes: '$code'"; }
    r=$(rss); [ "${r:-0}" -gt $peak ] && peak=$r
    f=$(fds); [ "${f:-0}" -gt $fdpeak ] && fdpeak=$f
    sleep 0.5
done
wait $spid; spid=
cat "$T/stress.out"
kill -0 $NASD_PID 2>/dev/null || { tail -30 "$T/nasd.log"; fail "nasd died"; }
echo "during: $probes REST probes, $slow failed; peak RSS $peak MiB; peak descriptors $fdpeak"
[ $slow = 0 ] || fail "REST did not answer $slow of $probes probes"
[ $((peak - rss0)) -lt 512 ] || fail "RSS grew by $((peak - rss0)) MiB (bound 512)"
for _ in $(seq 40); do [ "$(fds)" -le $((fd0 + 2)) ] && break; sleep 0.5; done
fd1=$(fds)
echo "after: $fd1 descriptors (baseline $fd0), RSS $(rss) MiB"
[ "$fd1" -le $((fd0 + 2)) ] || { ls -l /proc/$NASD_PID/fd | tail -20; fail "descriptors did not return to baseline ($fd1 vs $fd0)"; }
iscsi-inq "$URL" >/dev/null || fail "iscsi-inq after the stress"
grep -c 'refusing connection' "$T/nasd.log" | sed 's/^/refusal lines logged: /'
echo PASS
