#!/bin/bash
# bench-iscsi, in one run: iscsi-perf reads and bench/iscsi_wbench writes against
#  - nasd's target code on a plain file (tools/iscsi_serve), for writes also with
#    ImmediateData on (an export option, off by default),
#  - tgtd on the same 1 GiB file of random data,
#  - the nasd DAEMON serving a volume of a raidz1 pool of 4 member files (the real stack:
#    REST-provisioned export, pool engine with checksums, parity and cache in the path).
# Usage: mk/iscsi_bench.sh BUILD_DIR [SECONDS]
set -u
B=${1:-build}
SECS=${2:-10}
SERVE="$B/tools/iscsi_serve"
WBENCH="$B/bench/iscsi_wbench"
NASD="$B/nasd"
for t in "$SERVE" "$WBENCH" "$NASD"; do [ -x "$t" ] || { echo "$t not built"; exit 1; }; done
for c in iscsi-perf tgtd tgtadm; do command -v $c >/dev/null || { echo "$c missing (packages libiscsi-bin, tgt)"; exit 1; }; done
tmp=$(mktemp -d /tmp/nasd-iscsi-bench.XXXXXX)
pids=()
tgt_pid=
CPORT=$(( RANDOM % 800 + 100 ))   # tgtd control channel index (socket /var/run/tgtd/socket.N)
cleanup() {
    if [ -n "$tgt_pid" ]; then            # tgtd ignores SIGTERM while it has targets
        tgtadm -C "$CPORT" --op delete --mode system >/dev/null 2>&1
        for _ in $(seq 30); do kill -0 "$tgt_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$tgt_pid" 2>/dev/null; wait "$tgt_pid" 2>/dev/null
    fi
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    stop_nasd
    rm -rf "$tmp"
}
trap cleanup EXIT

NASD_BIN=$(cd "$(dirname "$NASD")" && pwd)/$(basename "$NASD")
. "$(dirname "$0")/../tests/integration/lib.sh"   # free_port, start_nasd, expect
NASD=$NASD_BIN

echo "filling 1 GiB with random data..."
head -c 1G /dev/urandom > "$tmp/lun.img" || exit 1
cat "$tmp/lun.img" > /dev/null                       # both targets read from the page cache

IQN_N=iqn.2026-12.test.nasd:bench
"$SERVE" --portal 127.0.0.1:0 --iqn "$IQN_N" --file "$tmp/lun.img" --log warn >"$tmp/n.out" 2>"$tmp/n.err" &
pids+=($!)
for _ in $(seq 100); do grep -q '^ready' "$tmp/n.out" && break; sleep 0.1; done
NPORT=$(awk '/^ready/ {print $3}' "$tmp/n.out")
[ -n "$NPORT" ] || { echo "iscsi_serve did not start"; cat "$tmp/n.err"; exit 1; }
"$SERVE" --portal 127.0.0.1:0 --iqn "$IQN_N" --file "$tmp/lun.img" --log warn --immediate-data yes >"$tmp/i.out" 2>"$tmp/i.err" &
pids+=($!)
for _ in $(seq 100); do grep -q '^ready' "$tmp/i.out" && break; sleep 0.1; done
IPORT=$(awk '/^ready/ {print $3}' "$tmp/i.out")
[ -n "$IPORT" ] || { echo "iscsi_serve --immediate-data did not start"; cat "$tmp/i.err"; exit 1; }

TPORT=$(free_port)
IQN_T=iqn.2026-12.test.tgt:bench
tgtd -f -C "$CPORT" --iscsi portal=127.0.0.1:$TPORT >"$tmp/t.log" 2>&1 &
tgt_pid=$!
sleep 1
tgtadm -C "$CPORT" --lld iscsi --mode target --op new --tid 1 --targetname $IQN_T &&
tgtadm -C "$CPORT" --lld iscsi --mode logicalunit --op new --tid 1 --lun 1 -b "$tmp/lun.img" &&
tgtadm -C "$CPORT" --lld iscsi --mode target --op bind --tid 1 -I ALL || { echo "tgt setup failed"; cat "$tmp/t.log"; exit 1; }

# The daemon: raidz1 of 4 x 512 MiB member files, a 1 GiB volume filled with the same data.
mkdir -p "$tmp/d"
start_nasd "$tmp/d" --log-level warn
m=""; for i in 0 1 2 3; do m="$m{\"path\":\"$tmp/d/m$i.img\",\"size\":\"512M\",\"create\":true},"; done
LAYOUT=${BENCH_POOL_LAYOUT:-raidz1}   # log-structured; raidz1-inplace: the in-place layout
expect 201 POST pools "{\"name\":\"bench\",\"layout\":\"$LAYOUT\",\"members\":[${m%,}]}"
expect 201 POST volumes '{"pool":"bench","name":"lun0","size":"1G"}'
expect 201 POST exports/iscsi '{"name":"bench","volume":"bench/lun0"}'
DURL="iscsi://127.0.0.1:$ISCSI_PORT/iqn.2026-12.io.nasd:bench/0"
echo "filling the daemon's raidz1 volume..."
"$WBENCH" -w -q 8 -b 1048576 -t 1 "$DURL" >/dev/null   # warm-up connection check
"$B/tools/iscsi_pattern" write "$DURL" 1 1024 >/dev/null || { echo "filling the raidz1 volume failed"; exit 1; }

run() {   # run URL ARGS... -> prints last "iops average"
    local url=$1; shift
    timeout $((SECS + 30)) iscsi-perf "$@" -t "$SECS" "$url" 2>&1 | tr '\r' '\n' |
        awk '/iops average/ {v=$0} END {sub(/.*iops average /, "", v); sub(/ .*/, "", v); print v+0}'
}
wrun() {  # wrun URL ARGS... -> "IOPS MB/s p50 p99" from iscsi_wbench
    local url=$1; shift
    timeout $((SECS + 30)) "$WBENCH" "$@" -t "$SECS" "$url" |
        awk '{print $2, $4, $6, $8}'
}
NURL="iscsi://127.0.0.1:$NPORT/$IQN_N/0"
IURL="iscsi://127.0.0.1:$IPORT/$IQN_N/0"
TURL="iscsi://127.0.0.1:$TPORT/$IQN_T/1"
declare -A R
for w in "4k-randread:-m 32 -b 8 -r" "512b-seqread:-m 32 -b 1"; do
    name=${w%%:*}; args=${w#*:}
    # shellcheck disable=SC2086
    R[$name,tgt]=$(run "$TURL" $args)
    # shellcheck disable=SC2086
    R[$name,nasd]=$(run "$NURL" $args)
    # shellcheck disable=SC2086
    R[$name,daemon]=$(run "$DURL" $args)
done
for w in "4k-randwrite:-w -r -q 32 -b 4096" "1m-seqwrite:-w -q 8 -b 1048576" "4k-fua-qd1:-w -r -f -q 1 -b 4096" \
         "4k-write-qd1:-w -r -q 1 -b 4096"; do
    name=${w%%:*}; args=${w#*:}
    for who in tgt:$TURL nasd:$NURL imm:$IURL daemon:$DURL; do
        [ "$name" = 4k-write-qd1 ] && [ "${who%%:*}" = daemon ] && continue   # only in the immediate-data table
        # shellcheck disable=SC2086
        R[$name,${who%%:*}]=$(wrun "${who#*:}" $args)
    done
done
ratio() { awk -v n="$1" -v t="$2" 'BEGIN { if (t > 0) printf "%.2f", n / t; else print "n/a" }'; }
echo
echo "file: nasd's target code (iscsi_serve) on a plain file; raidz1: the nasd daemon, volume on a $LAYOUT pool of 4 files"
printf '%-14s %11s %11s %11s %9s %9s\n' workload "tgt file" "nasd file" "nasd raidz1" "file/tgt" "raidz1/tgt"
for name in 4k-randread 512b-seqread; do
    t=${R[$name,tgt]}; n=${R[$name,nasd]}; d=${R[$name,daemon]}
    printf '%-14s %11s %11s %11s %9s %9s\n' "$name" "$t" "$n" "$d" "$(ratio "$n" "$t")" "$(ratio "$d" "$t")"
done
for name in 4k-randwrite 1m-seqwrite; do
    read -r ti tm _ _ <<<"${R[$name,tgt]}"; read -r ni nm _ _ <<<"${R[$name,nasd]}"; read -r di dm _ _ <<<"${R[$name,daemon]}"
    if [ "$name" = 1m-seqwrite ]; then ti="$tm MB/s"; ni="$nm MB/s"; di="$dm MB/s"; t=$tm; n=$nm; d=$dm
    else t=$ti; n=$ni; d=$di; fi
    printf '%-14s %11s %11s %11s %9s %9s\n' "$name" "$ti" "$ni" "$di" "$(ratio "$n" "$t")" "$(ratio "$d" "$t")"
done
read -r _ _ tp tq <<<"${R[4k-fua-qd1,tgt]}"; read -r _ _ np nq <<<"${R[4k-fua-qd1,nasd]}"; read -r _ _ dp dq <<<"${R[4k-fua-qd1,daemon]}"
printf '%-14s %11s %11s %11s %9s %9s\n' "4k-fua-qd1 p50" "${tp}us" "${np}us" "${dp}us" "$(ratio "$tp" "$np")" "$(ratio "$tp" "$dp")"
printf '%-14s %11s %11s %11s %9s %9s\n' "4k-fua-qd1 p99" "${tq}us" "${nq}us" "${dq}us" "$(ratio "$tq" "$nq")" "$(ratio "$tq" "$dq")"
echo "(reads: IOPS, iscsi-perf QD32; 4k-randwrite: IOPS QD32; 1m-seqwrite: QD8; 4k-fua-qd1: write latency with FUA, one at a time,"
echo " ratio = tgt/nasd so higher is better for nasd; ${SECS}s each, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "writes on the plain file with ImmediateData (export option immediate_data; tgt has it on by default):"
printf '%-16s %11s %11s %11s %9s %9s\n' workload "tgt file" "nasd file" "nasd+imm" "imm/nasd" "imm/tgt"
for name in 4k-randwrite 1m-seqwrite; do
    read -r ti tm _ _ <<<"${R[$name,tgt]}"; read -r ni nm _ _ <<<"${R[$name,nasd]}"; read -r ii im _ _ <<<"${R[$name,imm]}"
    if [ "$name" = 1m-seqwrite ]; then t=$tm; n=$nm; i=$im; u=" MB/s"; else t=$ti; n=$ni; i=$ii; u=; fi
    printf '%-16s %11s %11s %11s %9s %9s\n' "$name" "$t$u" "$n$u" "$i$u" "$(ratio "$i" "$n")" "$(ratio "$i" "$t")"
done
for name in 4k-fua-qd1 4k-write-qd1; do
    read -r _ _ tp tq <<<"${R[$name,tgt]}"; read -r _ _ np nq <<<"${R[$name,nasd]}"; read -r _ _ ip iq <<<"${R[$name,imm]}"
    printf '%-16s %11s %11s %11s %9s %9s\n' "$name p50" "${tp}us" "${np}us" "${ip}us" "$(ratio "$np" "$ip")" "$(ratio "$tp" "$ip")"
    printf '%-16s %11s %11s %11s %9s %9s\n' "$name p99" "${tq}us" "${nq}us" "${iq}us" "$(ratio "$nq" "$iq")" "$(ratio "$tq" "$iq")"
done
echo "(4k-write-qd1: plain 4 KiB writes one at a time; latency ratios = other/imm, higher is better for nasd+imm)"
