#!/bin/bash
# Side-by-side NFSv3 benchmark: our service (tests/tools/nfs_serve on high ports)
# and nfs-ganesha 4.3 (VFS FSAL, ports 111/2049/20048, needs root), same workload
# from bench/nfs_bench.c against each, then the ratios. Everything started here is
# stopped on exit.
#   bench/nfs_bench.sh [extra nfs_bench args, e.g. --dirs 10 --seconds 5]
# Each server exports the root of its own freshly made ext4 filesystem (a loop-mounted
# 4 GiB sparse image under NFS_BENCH_DIR, default /tmp): ext4 create cost depends on
# the allocator state (it skips inodes freed in the last ~30 s), which on a shared
# machine other processes keep changing. NFS_BENCH_FS=dir exports plain directories
# under NFS_BENCH_DIR instead (then NFS_BENCH_PAUSE, default 35 s, separates the runs).
# A third run serves a dataset on nasd's pool engine (ext2 in a pool volume on a 4 GiB
# sparse member file, what the daemon's datasets are) to show what the engine costs.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/integration/lib.sh   # free_port
B=${B:-build}
BENCH=$B/bench/nfs_bench
SERVE=$B/tools/nfs_serve
for b in "$BENCH" "$SERVE"; do [ -x "$b" ] || { echo "missing $b (make all)"; exit 1; }; done

WORK=$(mktemp -d "${NFS_BENCH_DIR:-/tmp}/nfsbench.XXXXXX")
FSMODE=${NFS_BENCH_FS:-loop}
PAUSE=${NFS_BENCH_PAUSE:-35}
[ "$FSMODE" = loop ] && PAUSE=0
PIDS=()
MOUNTS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    [ -f "$WORK/g.pid" ] && kill "$(cat "$WORK/g.pid")" 2>/dev/null
    sleep 0.5
    for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null || umount -l "$m"; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# Makes $WORK/$1 the directory to export (a fresh ext4 in loop mode).
make_export_dir() {
    local d="$WORK/$1"
    mkdir -p "$d"
    if [ "$FSMODE" = loop ]; then
        truncate -s 4G "$WORK/$1.img" && mkfs.ext4 -q -F "$WORK/$1.img" && mount -o loop "$WORK/$1.img" "$d" ||
            { echo "cannot loop-mount an ext4 image (use NFS_BENCH_FS=dir)"; exit 1; }
        MOUNTS+=("$d")
    fi
    echo "   exporting $d ($(df -T "$d" | awk 'NR==2 {print $2}'), $FSMODE)"
}

run_ours() {
    make_export_dir ours
    NP=$(free_port); MP=$(free_port $NP)
    "$SERVE" --dir "$WORK/ours" --path /export --nfsport "$NP" --mountport "$MP" --log warn > "$WORK/ours.out" 2> "$WORK/ours.log" &
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 100); do grep -q '^ready' "$WORK/ours.out" && break; sleep 0.05; done
    "$BENCH" --server 127.0.0.1 --export /export --nfsport "$NP" --mountport "$MP" --label nasd "$@" | tee "$WORK/ours.res"
    kill "$pid"; wait "$pid" 2>/dev/null
}

run_engine() {
    mkdir -p "$WORK/engine"
    NP=$(free_port); MP=$(free_port $NP)
    "$SERVE" --engine "$WORK/engine" --engine-size 4294967296 --path /export --nfsport "$NP" --mountport "$MP" \
        --log warn > "$WORK/engine.out" 2> "$WORK/engine.log" &
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 200); do grep -q '^ready' "$WORK/engine.out" && break; sleep 0.05; done
    echo "   exporting an engine dataset (stripe pool on $WORK/engine/member.img)"
    "$BENCH" --server 127.0.0.1 --export /export --nfsport "$NP" --mountport "$MP" --label nasd-engine "$@" | tee "$WORK/engine.res"
    kill "$pid"; wait "$pid" 2>/dev/null
}

run_ganesha() {
    if ! command -v ganesha.nfsd > /dev/null; then
        echo "nfs-ganesha not installed (apt-get install nfs-ganesha nfs-ganesha-vfs rpcbind)"; return 1
    fi
    if ss -ltn | grep -qE ':(2049|20048) '; then echo "ports 2049/20048 busy; skipping ganesha"; return 1; fi
    make_export_dir groot
    if ! ss -ltn | grep -q ':111 '; then
        rpcbind -w -f &
        PIDS+=("$!")
        sleep 0.5
    fi
    cat > "$WORK/g.conf" <<X
NFS_CORE_PARAM { Protocols = 3; NFS_Port = 2049; MNT_Port = 20048; Bind_addr = 127.0.0.1; Enable_NLM = false; Enable_RQUOTA = false; }
EXPORT { Export_Id = 1; Path = $WORK/groot; Pseudo = /groot; Access_Type = RW; Squash = No_Root_Squash;
         Protocols = 3; Transports = TCP; SecType = sys; FSAL { Name = VFS; } }
LOG { Default_Log_Level = WARN; }
X
    ganesha.nfsd -F -f "$WORK/g.conf" -L "$WORK/g.log" -p "$WORK/g.pid" &
    PIDS+=("$!")
    for _ in $(seq 100); do ss -ltn | grep -q ':20048 ' && ss -ltn | grep -q ':2049 ' && break; sleep 0.2; done
    sleep 1
    "$BENCH" --server 127.0.0.1 --export "$WORK/groot" --nfsport 2049 --mountport 20048 --label ganesha "$@" | tee "$WORK/g.res"
}

echo "== nasd NFS service"
start=$(date +%s)
run_ours "$@" || exit 1
echo "   (took $(( $(date +%s) - start )) s)"
if [ "$PAUSE" -gt 0 ]; then
    echo "   (pausing ${PAUSE}s so both servers start from the same allocator state)"
    sleep "$PAUSE"
fi
echo "== nasd NFS service on a pool-engine dataset"
start=$(date +%s)
run_engine "$@"
echo "   (took $(( $(date +%s) - start )) s)"
echo "== nfs-ganesha"
start=$(date +%s)
run_ganesha "$@"
echo "   (took $(( $(date +%s) - start )) s)"

echo "== comparison (nasd on ext4 / ganesha on ext4; nasd on its engine / ganesha on ext4)"
for m in create_ops_s remove_ops_s write_1m_qd8_mb_s randread_4k_qd32_ops_s; do
    a=$(awk -v m="$m" '$3 ~ "^"m {print $4}' "$WORK/ours.res" 2>/dev/null)
    b=$(awk -v m="$m" '$3 ~ "^"m {print $4}' "$WORK/g.res" 2>/dev/null)
    e=$(awk -v m="$m" '$3 ~ "^"m {print $4}' "$WORK/engine.res" 2>/dev/null)
    if [ -n "$a" ] && [ -n "$b" ] && [ -n "$e" ] && [ "$b" != 0 ]; then
        printf '%-26s nasd %10s   ganesha %10s   ratio %.2fx   engine %10s   ratio %.2fx\n' "$m" "$a" "$b" \
            "$(echo "$a / $b" | bc -l)" "$e" "$(echo "$e / $b" | bc -l)"
    else
        printf '%-26s nasd %10s   ganesha %10s   engine %10s\n' "$m" "${a:-n/a}" "${b:-n/a}" "${e:-n/a}"
    fi
done
