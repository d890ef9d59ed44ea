#!/bin/bash
# bench-ceph: iSCSI on an RBD image of one throw-away Ceph cluster (tests/ceph/cluster.sh,
# memstore OSD) through the nasd daemon (ceph pool over REST) and through tgtd's rbd
# backing store (bs_rbd, Debian's tgt-rbd), side by side: iscsi-perf 4K random reads,
# bench/iscsi_wbench 4K random writes and 1 MiB sequential writes; ratios nasd/tgt.
# Both clients of the cluster run with the RBD cache off (nasd always does: a second
# gateway must see acknowledged writes). tgtd runs under flock /tmp/nasd-ref-servers.lock.
# Usage: mk/ceph_bench.sh BUILD_DIR [SECONDS]
set -u
B=${1:-build}
SECS=${2:-10}
WBENCH="$B/bench/iscsi_wbench"
PATTERN="$B/tools/iscsi_pattern"
for t in "$WBENCH" "$PATTERN" "$B/nasd"; do [ -x "$t" ] || { echo "$t not built"; exit 1; }; done
for c in iscsi-perf tgtd tgtadm; do command -v $c >/dev/null || { echo "$c missing (packages libiscsi-bin, tgt)"; exit 1; }; done
NASD_BIN=$(cd "$(dirname "$B/nasd")" && pwd)/nasd
. "$(dirname "$0")/../tests/integration/lib.sh"
NASD=$NASD_BIN
. "$ROOT/tests/ceph/lib.sh"
tmp=$(mktemp -d /tmp/nasd-ceph-bench.XXXXXX)
tgt_pid=
CPORT=$(( RANDOM % 800 + 100 ))
cleanup() {
    if [ -n "$tgt_pid" ]; then
        tgtadm -C "$CPORT" --op delete --mode system >/dev/null 2>&1
        for _ in $(seq 30); do kill -0 "$tgt_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$tgt_pid" 2>/dev/null; wait "$tgt_pid" 2>/dev/null
    fi
    stop_nasd
    ceph_down
    rm -rf "$tmp"
}
trap cleanup EXIT
CEPH_OSD_BYTES=$((3 << 30)) ceph_up "$tmp"
SIZE_MB=512
rbd create --size ${SIZE_MB}M --image-feature layering rbd/tgtlun || exit 1
{ cat "$CEPH_CONF"; printf '[client]\nrbd cache = false\nrbd skip partial discard = false\n'; } > "$tmp/tgt.conf"

mkdir -p "$tmp/d"
start_nasd "$tmp/d" --log-level warn
expect 201 POST pools "$(ceph_pool_json rbdpool)"
expect 201 POST volumes "{\"pool\":\"rbdpool\",\"name\":\"lun0\",\"size\":\"${SIZE_MB}M\"}"
expect 201 POST exports/iscsi '{"name":"bench","volume":"rbdpool/lun0"}'
NURL="iscsi://127.0.0.1:$ISCSI_PORT/iqn.2026-12.io.nasd:bench/0"

run() {   # run URL ARGS... -> last "iops average" of iscsi-perf
    local url=$1; shift
    timeout $((SECS + 30)) iscsi-perf "$@" -t "$SECS" "$url" 2>&1 | tr '\r' '\n' |
        awk '/iops average/ {v=$0} END {sub(/.*iops average /, "", v); sub(/ .*/, "", v); print v+0}'
}
wrun() {  # wrun URL ARGS... -> "IOPS MB/s p50 p99" from iscsi_wbench
    local url=$1; shift
    timeout $((SECS + 30)) "$WBENCH" "$@" -t "$SECS" "$url" | awk '{print $2, $4, $6, $8}'
}

# tgtd is a reference server: one at a time on the machine
exec 9>/tmp/nasd-ref-servers.lock
flock 9
TPORT=$(free_port "$ISCSI_PORT" "$HTTP_PORT")
IQN_T=iqn.2026-12.test.tgt:cephbench
tgtd -f -C "$CPORT" --iscsi portal=127.0.0.1:$TPORT >"$tmp/t.log" 2>&1 &
tgt_pid=$!
sleep 1
tgtadm -C "$CPORT" --lld iscsi --mode system --op show | grep -q '^ *rbd' ||
  { echo "tgtd has no rbd backing store (package tgt-rbd)"; exit 1; }
tgtadm -C "$CPORT" --lld iscsi --mode target --op new --tid 1 --targetname $IQN_T &&
tgtadm -C "$CPORT" --lld iscsi --mode logicalunit --op new --tid 1 --lun 1 --bstype rbd \
  --backing-store rbd/tgtlun --bsopts "conf=$tmp/tgt.conf" &&
tgtadm -C "$CPORT" --lld iscsi --mode target --op bind --tid 1 -I ALL || { echo "tgt setup failed"; cat "$tmp/t.log"; exit 1; }
TURL="iscsi://127.0.0.1:$TPORT/$IQN_T/1"

echo "filling both ${SIZE_MB} MiB images (reads must not hit holes)..."
"$PATTERN" write "$NURL" 1 $SIZE_MB >/dev/null || { echo "filling the nasd volume failed"; exit 1; }
"$PATTERN" write "$TURL" 1 $SIZE_MB >/dev/null || { echo "filling the tgt image failed"; exit 1; }

declare -A R
R[4k-randread,tgt]=$(run "$TURL" -m 32 -b 8 -r)
R[4k-randread,nasd]=$(run "$NURL" -m 32 -b 8 -r)
for w in "4k-randwrite:-w -r -q 32 -b 4096" "1m-seqwrite:-w -q 8 -b 1048576" "1m-seqread:-q 8 -b 1048576"; do
    name=${w%%:*}; args=${w#*:}
    # shellcheck disable=SC2086
    R[$name,tgt]=$(wrun "$TURL" $args)
    # shellcheck disable=SC2086
    R[$name,nasd]=$(wrun "$NURL" $args)
done
ratio() { awk -v n="$1" -v t="$2" 'BEGIN { if (t > 0) printf "%.2f", n / t; else print "n/a" }'; }
echo
echo "iSCSI on RBD (one memstore OSD, size 1): nasd daemon (ceph pool) vs tgtd bs_rbd, same cluster"
printf '%-14s %14s %14s %10s\n' workload "tgt rbd" "nasd rbd" "nasd/tgt"
t=${R[4k-randread,tgt]}; n=${R[4k-randread,nasd]}
printf '%-14s %14s %14s %10s\n' 4k-randread "$t IOPS" "$n IOPS" "$(ratio "$n" "$t")"
read -r t _ _ _ <<<"${R[4k-randwrite,tgt]}"; read -r n _ _ _ <<<"${R[4k-randwrite,nasd]}"
printf '%-14s %14s %14s %10s\n' 4k-randwrite "$t IOPS" "$n IOPS" "$(ratio "$n" "$t")"
for name in 1m-seqwrite 1m-seqread; do
    read -r _ t _ _ <<<"${R[$name,tgt]}"; read -r _ n _ _ <<<"${R[$name,nasd]}"
    printf '%-14s %14s %14s %10s\n' $name "$t MB/s" "$n MB/s" "$(ratio "$n" "$t")"
done
echo "(4k-randread: iscsi-perf QD32; 4k-randwrite: iscsi_wbench QD32; 1m-seq*: iscsi_wbench QD8;"
echo " ${SECS}s each, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
