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
# NFS_BENCH_SERVERS (default "dir engine ganesha") picks the runs. Ganesha runs under
# flock /tmp/nasd-ref-servers.lock (one reference server on the machine at a time, held
# for the whole bench) and is stopped before the lock is released.
# NFS_BENCH_ROUNDS (default 3): the servers run in interleaved rounds (each round starts
# with the next server), and every row is the median over the rounds. The host under
# this VM changes how fast a vCPU runs for minutes at a time (bench/cpu_probe, printed
# before every run), so one run per server measured the machine as much as the server.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/integration/lib.sh   # free_port
B=${B:-build}
BENCH=$B/bench/nfs_bench
SERVE=$B/tools/nfs_serve
PROBE=$B/bench/cpu_probe
for b in "$BENCH" "$SERVE" "$PROBE"; do [ -x "$b" ] || { echo "missing $b (make all)"; exit 1; }; done

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
    for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# Makes $WORK/$1 the directory to export (a fresh ext4 in loop mode).
make_export_dir() {
    local d="$WORK/$1"
    mkdir -p "$d"
    if [ "$FSMODE" = loop ]; then
        # inode tables and journal zeroed now, not by ext4lazyinit in the background of
        # the runs that follow (the engine's QD1 WRITE p50 read 131 us after the ext4 run,
        # 77 us in a run of the engine alone)
        truncate -s 4G "$WORK/$1.img" && mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$WORK/$1.img" &&
            mount -o loop "$WORK/$1.img" "$d" ||
            { echo "cannot loop-mount an ext4 image (use NFS_BENCH_FS=dir)"; exit 1; }
        MOUNTS+=("$d")
    fi
    echo "   exporting $d ($(df -T "$d" | awk 'NR==2 {print $2}'), $FSMODE)"
}

# Each phase group runs against a freshly started server: in full runs ganesha stopped
# answering after its create/remove phase (2 of 2 runs on 2026-12-03), which then cost
# it every later row. NFS_BENCH_GROUPS (default "meta data,qd1,mc") sets the groups;
# an explicit --phases argument runs as one group. Results go to one .res file per server and round.
GROUPS_=${NFS_BENCH_GROUPS:-meta data,qd1,mc}
for a in "$@"; do case "$a" in --phases*) GROUPS_=all ;; esac; done
group_args() { [ "$1" = all ] || echo "--phases $1"; }

# Before each group: every earlier run's dirty pages written back, so no run pays for
# another's writeback.
settle() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; sleep 1; echo "   cpu probe (ms): $("$PROBE" | tr "\n" " ")"; }

# One group against a fresh nfs_serve: serve_group LABEL NAME GROUP SERVE_ARGS... -- BENCH_ARGS...
# ($WORK/NAME.out/.log/.res hold its output, log and results).
serve_group() {
    local label=$1 name=$2 g=$3; shift 3
    local sargs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do sargs+=("$1"); shift; done
    shift
    settle
    NP=$(free_port); MP=$(free_port $NP)
    "$SERVE" "${sargs[@]}" --path /export --nfsport "$NP" --mountport "$MP" --log warn > "$WORK/$name.out" 2>> "$WORK/$name.log" &
    local pid=$!
    PIDS+=("$pid")
    for _ in $(seq 200); do grep -q '^ready' "$WORK/$name.out" && break; sleep 0.05; done
    # shellcheck disable=SC2046
    "$BENCH" --server 127.0.0.1 --export /export --nfsport "$NP" --mountport "$MP" --label "$label" $(group_args "$g") "$@" | tee -a "$WORK/$name.r$ROUND.res"
    kill "$pid"; wait "$pid" 2>/dev/null
}

run_ours() {
    local d=ours$ROUND
    make_export_dir $d
    for g in $GROUPS_; do serve_group nasd ours "$g" --dir "$WORK/$d" -- "$@"; done
    if [ "$FSMODE" = loop ]; then   # nothing of it runs on during the next server's runs
        umount "$WORK/$d" && rm -f "$WORK/$d.img"
    fi
}

run_engine() {
    local i=0
    for g in $GROUPS_; do
        i=$((i + 1))
        mkdir -p "$WORK/engine$i"
        echo "   exporting an engine dataset (stripe pool on $WORK/engine$i/member.img)"
        serve_group nasd-engine engine "$g" --engine "$WORK/engine$i" --engine-size 4294967296 -- "$@"
        rm -rf "$WORK/engine$i"
    done
}

run_ganesha() {
    if ! command -v ganesha.nfsd > /dev/null; then
        echo "nfs-ganesha not installed (apt-get install nfs-ganesha nfs-ganesha-vfs rpcbind)"; return 1
    fi
    if ss -ltn | grep -qE ':(2049|20048) '; then echo "ports 2049/20048 busy; skipping ganesha"; return 1; fi
    local d=groot$ROUND
    make_export_dir $d
    if ! ss -ltn | grep -q ':111 '; then
        rpcbind -w -f &
        PIDS+=("$!")
        sleep 0.5
    fi
    cat > "$WORK/g.conf" <<X
NFS_CORE_PARAM { Protocols = 3; NFS_Port = 2049; MNT_Port = 20048; Bind_addr = 127.0.0.1; Enable_NLM = false; Enable_RQUOTA = false; }
EXPORT { Export_Id = 1; Path = $WORK/$d; Pseudo = /groot; Access_Type = RW; Squash = No_Root_Squash;
         Protocols = 3; Transports = TCP; SecType = sys; FSAL { Name = VFS; } }
LOG { Default_Log_Level = WARN; }
X
    for g in $GROUPS_; do
        settle
        ganesha.nfsd -F -f "$WORK/g.conf" -L "$WORK/g.log" -p "$WORK/g.pid" &
        local gpid=$!
        for _ in $(seq 100); do ss -ltn | grep -q ':20048 ' && ss -ltn | grep -q ':2049 ' && break; sleep 0.2; done
        sleep 1
        # shellcheck disable=SC2046
        "$BENCH" --server 127.0.0.1 --export "$WORK/$d" --nfsport 2049 --mountport 20048 --label ganesha $(group_args "$g") "$@" | tee -a "$WORK/g.r$ROUND.res"
        kill "$(cat "$WORK/g.pid")" 2>/dev/null
        wait "$gpid" 2>/dev/null
        for _ in $(seq 50); do ss -ltn | grep -qE ':(2049|20048) ' || break; sleep 0.2; done
    done
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -f "$WORK/g.pid"
    PIDS=()
    if [ "$FSMODE" = loop ]; then umount "$WORK/$d" && rm -f "$WORK/$d.img"; fi
}

SERVERS=${NFS_BENCH_SERVERS:-dir engine ganesha}
ROUNDS=${NFS_BENCH_ROUNDS:-3}
read -r -a ORDER <<< "$SERVERS"
if [[ " $SERVERS " == *" ganesha "* ]]; then
    echo "== waiting for /tmp/nasd-ref-servers.lock (ganesha)"
    exec 9> /tmp/nasd-ref-servers.lock
    flock 9
fi
# one server's run in round $ROUND
run_server() {
    local start rc=0
    start=$(date +%s)
    case "$1" in
    dir) echo "== round $ROUND: nasd NFS service"; run_ours "${@:2}" || rc=1 ;;
    engine) echo "== round $ROUND: nasd NFS service on a pool-engine dataset"; run_engine "${@:2}" ;;
    ganesha) echo "== round $ROUND: nfs-ganesha"; run_ganesha "${@:2}" ;;
    *) echo "unknown server $1"; rc=1 ;;
    esac
    echo "   (took $(( $(date +%s) - start )) s)"
    if [ "$1" = dir ] && [ "$PAUSE" -gt 0 ]; then
        echo "   (pausing ${PAUSE}s so both servers start from the same allocator state)"
        sleep "$PAUSE"
    fi
    return $rc
}
for ROUND in $(seq "$ROUNDS"); do
    n=${#ORDER[@]}
    for k in $(seq 0 $((n - 1))); do
        run_server "${ORDER[$(( (k + ROUND - 1) % n ))]}" "$@" || exit 1
    done
done
[[ " $SERVERS " == *" ganesha "* ]] && flock -u 9

# the values of metric $1 in result files $2...
metric() { local m=$1; shift; cat "$@" 2>/dev/null | awk -v m="$m" '$3 == m {print $4}'; }
# median over the rounds of metric $1 in result files $WORK/$2.r*.res
val() {
    metric "$1" "$WORK/$2".r*.res | sort -g |
        awk '{a[NR] = $1} END {if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}'
}
# how many times better than ganesha: $1 nasd, $2 ganesha, $3 metric (latency: ganesha/nasd)
better() {
    [ -n "$1" ] && [ -n "$2" ] || return
    if [[ "$3" == *_us ]]; then awk -v a="$2" -v b="$1" 'BEGIN {if (b > 0) printf "%.2f", a / b}'
    else awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b}'; fi
}
# lowest-highest of the per-round ratios of metric $1 for result name $2 (each round's runs are neighbours in time)
spread() {
    local k r all=()
    for k in $(seq "$ROUNDS"); do
        r=$(better "$(metric "$1" "$WORK/$2.r$k.res")" "$(metric "$1" "$WORK/g.r$k.res")" "$1")
        [ -n "$r" ] && all+=("$r")
    done
    [ ${#all[@]} -gt 0 ] && printf '%s\n' "${all[@]}" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print lo "-" hi}'
}
ratio() { local r; r=$(better "$1" "$2" "$3"); [ -n "$r" ] && echo "${r}x" || echo n/a; }

echo "== comparison: medians of $ROUNDS rounds; ratio = how many times better than ganesha"
echo "   (throughput: nasd/ganesha; latency in us: ganesha/nasd), nasd on ext4 (dir) and on its"
echo "   pool engine; 'rounds' = lowest-highest ratio of a single round"
printf '%-26s %10s %10s %7s %11s %10s %7s %11s\n' metric ganesha nasd-dir ratio rounds engine ratio rounds
metrics=$(awk '$1 == "RESULT" {print $3}' "$WORK"/*.res 2>/dev/null | awk '!seen[$0]++')
for m in $metrics; do
    g=$(val "$m" g); a=$(val "$m" ours); e=$(val "$m" engine)
    printf '%-26s %10s %10s %7s %11s %10s %7s %11s\n' "$m" "${g:-n/a}" "${a:-n/a}" "$(ratio "$a" "$g" "$m")" \
        "$(spread "$m" ours)" "${e:-n/a}" "$(ratio "$e" "$g" "$m")" "$(spread "$m" engine)"
done
