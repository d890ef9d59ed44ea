#!/bin/bash
# NFS + REST stress (issue #11): for 20 s, hundreds of connections from 8 attacker
# addresses connect to nasd's NFS, MOUNT and REST ports, send garbage or half records,
# pipeline 1 MiB READs and never read the replies, trickle HTTP headers, reset. Holds:
# REST (from 127.0.0.1) answers every check within 2 s, the daemon's RSS stays within
# RSS_BOUND_MB of its baseline (NFS drops a non-reading client at 64 MiB queued and caps
# queued replies at 256 MiB in all), and its descriptors return to baseline afterwards.
set -u
. "$(dirname "$0")/lib.sh"
RSS_BOUND_MB=${RSS_BOUND_MB:-384}
SECS=${STRESS_SECONDS:-20}
T=$(mktemp -d /tmp/nasd37.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
start_nasd "$T" --iscsi-portal ""
expect 201 POST pools "{\"name\":\"tank\",\"layout\":\"stripe\",\"members\":[{\"path\":\"$T/d0.img\",\"size\":\"256M\",\"create\":true}]}"
expect 201 POST datasets '{"pool":"tank","name":"share","mode":"0777"}'
expect 201 POST exports/nfs '{"dataset":"tank/share","clients":["127.0.0.0/8"],"root_squash":false}'
head -c $((8 << 20)) /dev/urandom > "$T/big"
nfs-cp "$T/big" "nfs://127.0.0.1/tank/share/big?nfsport=$NFS_PORT&mountport=$MOUNT_PORT" >/dev/null || fail "nfs-cp"

# the daemon's own memory (RssAnon): the pool's member mappings count in VmRSS as file pages
rss() { awk '/^RssAnon:/ {print $2}' /proc/$NASD_PID/status; }
fds() { ls /proc/$NASD_PID/fd | wc -l; }
sleep 1
base_rss=$(rss); base_fds=$(fds)
echo "baseline: RSS $((base_rss / 1024)) MiB, $base_fds descriptors"
out=$(timeout $((SECS + 60)) python3 "$ROOT/tests/tools/nfs_stress.py" 127.0.0.1 $NFS_PORT $MOUNT_PORT $HTTP_PORT \
      /tank/share big "$SECS" $NASD_PID) || fail "stress client: $out"
echo "$out"
kill -0 $NASD_PID || fail "nasd died"
max_rss=$(awk '/^max_rss_kb/ {print $2}' <<<"$out")
checks=$(awk '/^rest_checks/ {print $2}' <<<"$out")
bad=$(awk '/^rest_failures/ {print $2}' <<<"$out")
conns=$(awk '/^conns/ {print $2}' <<<"$out")
grow=$(( (max_rss - base_rss) / 1024 ))
echo "RSS peak $((max_rss / 1024)) MiB (+$grow MiB, bound +$RSS_BOUND_MB), $conns hostile connections, REST $bad of $checks checks failed"
[ "$conns" -ge 300 ] || fail "only $conns hostile connections made"
[ "$checks" -ge "$SECS" ] || fail "only $checks REST checks ran (one a second at least)"
[ "$bad" = 0 ] || fail "REST failed $bad of $checks checks during the attack"
[ "$grow" -le "$RSS_BOUND_MB" ] || fail "RSS grew by $grow MiB (bound $RSS_BOUND_MB)"
for _ in $(seq 40); do [ "$(fds)" -le $((base_fds + 2)) ] && break; sleep 0.5; done
[ "$(fds)" -le $((base_fds + 2)) ] || { ls -l /proc/$NASD_PID/fd | tail -20; fail "descriptors $(fds), baseline $base_fds"; }
[ "$(nfs-cat "nfs://127.0.0.1/tank/share/big?nfsport=$NFS_PORT&mountport=$MOUNT_PORT" | sha256sum)" = \
  "$(sha256sum < "$T/big")" ] || fail "NFS read after the attack"
expect 200 GET system
echo "37_nfs_stress: ok (log: $(wc -l < "$T/nasd.log") lines)"
