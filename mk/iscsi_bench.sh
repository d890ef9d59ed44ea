#!/bin/bash
# bench-iscsi: iscsi-perf against the built-in target (tools/iscsi_serve) and tgtd,
# both serving the same 1 GiB file of random data, in one run.
# Usage: mk/iscsi_bench.sh BUILD_DIR [SECONDS]
set -u
B=${1:-build}
SECS=${2:-10}
SERVE="$B/tools/iscsi_serve"
for t in "$SERVE"; do [ -x "$t" ] || { echo "$t not built"; exit 1; }; done
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
    rm -rf "$tmp"
}
trap cleanup EXIT

. "$(dirname "$0")/../tests/integration/lib.sh"   # free_port

echo "filling 1 GiB with random data..."
head -c 1G /dev/urandom > "$tmp/lun.img" || exit 1
cat "$tmp/lun.img" > /dev/null                       # both targets read from the page cache

IQN_N=iqn.2026-12.test.nasd:bench
"$SERVE" --portal 127.0.0.1:0 --iqn "$IQN_N" --file "$tmp/lun.img" --log warn >"$tmp/n.out" 2>"$tmp/n.err" &
pids+=($!)
for _ in $(seq 100); do grep -q '^ready' "$tmp/n.out" && break; sleep 0.1; done
NPORT=$(awk '/^ready/ {print $3}' "$tmp/n.out")
[ -n "$NPORT" ] || { echo "iscsi_serve did not start"; cat "$tmp/n.err"; exit 1; }

TPORT=$(free_port)
IQN_T=iqn.2026-12.test.tgt:bench
tgtd -f -C "$CPORT" --iscsi portal=127.0.0.1:$TPORT >"$tmp/t.log" 2>&1 &
tgt_pid=$!
sleep 1
tgtadm -C "$CPORT" --lld iscsi --mode target --op new --tid 1 --targetname $IQN_T &&
tgtadm -C "$CPORT" --lld iscsi --mode logicalunit --op new --tid 1 --lun 1 -b "$tmp/lun.img" &&
tgtadm -C "$CPORT" --lld iscsi --mode target --op bind --tid 1 -I ALL || { echo "tgt setup failed"; cat "$tmp/t.log"; exit 1; }

run() {   # run URL ARGS... -> prints last "iops average"
    local url=$1; shift
    timeout $((SECS + 30)) iscsi-perf "$@" -t "$SECS" "$url" 2>&1 | tr '\r' '\n' |
        awk '/iops average/ {v=$0} END {sub(/.*iops average /, "", v); sub(/ .*/, "", v); print v+0}'
}
NURL="iscsi://127.0.0.1:$NPORT/$IQN_N/0"
TURL="iscsi://127.0.0.1:$TPORT/$IQN_T/1"
declare -A R
for w in "4k-randread:-m 32 -b 8 -r" "512b-seqread:-m 32 -b 1"; do
    name=${w%%:*}; args=${w#*:}
    # shellcheck disable=SC2086
    R[$name,tgt]=$(run "$TURL" $args)
    # shellcheck disable=SC2086
    R[$name,nasd]=$(run "$NURL" $args)
done
echo
printf '%-14s %12s %12s %8s\n' workload "nasd IOPS" "tgt IOPS" ratio
for name in 4k-randread 512b-seqread; do
    n=${R[$name,nasd]}; t=${R[$name,tgt]}
    ratio=$(awk -v n="$n" -v t="$t" 'BEGIN { if (t > 0) printf "%.2f", n / t; else print "n/a" }')
    printf '%-14s %12s %12s %8s\n' "$name" "$n" "$t" "$ratio"
done
echo "(iscsi-perf QD32, ${SECS}s each, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
