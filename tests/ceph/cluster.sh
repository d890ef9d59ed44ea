#!/bin/bash
# A throw-away single-node Ceph cluster from the Debian packages, for tests and to try
# ceph pools by hand: one monitor, one manager, one OSD (memstore by default, or a small
# file-backed bluestore with CEPH_OSD_STORE=bluestore), replication size 1, cephx on,
# everything on 127.0.0.1 high ports with all state under DIR.
#
#   tests/ceph/cluster.sh start DIR   # creates DIR, starts the daemons, makes pool "rbd"
#   tests/ceph/cluster.sh env DIR     # prints CEPH_CONF=..., CEPH_MON=..., CEPH_KEY=... (shell syntax)
#   tests/ceph/cluster.sh stop DIR    # stops the daemons (the state stays until DIR is removed)
#
# After `eval "$(tests/ceph/cluster.sh env DIR)"`: `ceph -s`, `rbd ls rbd` work (CEPH_CONF is
# exported). Modelled on the ideas of ceph's src/vstart.sh (monmap + keyring by hand, one
# conf file), written small for this one layout.
set -e
cmd=$1 dir=$2
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|env DIR" >&2; exit 2; }
dir=$(mkdir -p "$dir" && cd "$dir" && pwd)
conf=$dir/ceph.conf

. "$(dirname "${BASH_SOURCE[0]}")/../ports.sh"
# A block of 100 ports for this cluster: the monitor's two, then the OSD/MGR bind range.
# From the tests' range (tests/ports.sh), none listening, and claimed in
# /tmp/nasd-ceph-ports so that two clusters started side by side never share one.
claims=/tmp/nasd-ceph-ports
claim_ports() {
  local b p busy PORTS_FROM PORTS_TO
  ports_range
  mkdir -p "$claims"
  for _ in $(seq 200); do
    b=$(( PORTS_FROM + (RANDOM % ((PORTS_TO - PORTS_FROM) / 100 - 1)) * 100 ))
    claim_stale "$b" && rm -rf "${claims:?}/$b"
    mkdir "$claims/$b" 2>/dev/null || continue
    busy=""
    for p in $(seq "$b" $((b + 99))); do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && { busy=1; break; }; done
    [ -z "$busy" ] && { echo "$dir" >"$claims/$b/owner"; echo "$b"; return; }
    rm -rf "${claims:?}/$b"
  done
  echo "no free block of 100 ports" >&2; exit 1
}
# a claim is stale when its cluster's monitor is gone and it is older than a start takes
claim_stale() {
  local c=$claims/$1 owner
  [ -d "$c" ] || return 1
  owner=$(cat "$c/owner" 2>/dev/null)
  [ -n "$owner" ] && [ -f "$owner/run/mon.a.pid" ] && kill -0 "$(cat "$owner/run/mon.a.pid")" 2>/dev/null && return 1
  [ -n "$(find "$c" -maxdepth 0 -mmin +5)" ]
}
claim_release() {
  local b
  b=$(sed -n 's/^ms bind port min = //p' "$conf" 2>/dev/null) || true
  [ -n "$b" ] && [ "$(cat "$claims/$((b - 2))/owner" 2>/dev/null)" = "$dir" ] && rm -rf "${claims:?}/$((b - 2))"
  return 0
}

daemons_stop() {
  local pids=""
  for f in "$dir"/run/*.pid; do
    [ -f "$f" ] || continue
    local pid; pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null && pids="$pids $pid"
    rm -f "$f"
  done
  for pid in $pids; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    # only one still running: a pid that already exited may name another process by now
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  done
}

start() {
  [ -f "$dir/run/mon.a.pid" ] && kill -0 "$(cat "$dir/run/mon.a.pid")" 2>/dev/null &&
    { echo "cluster in $dir is already running" >&2; exit 1; }
  for b in ceph-mon ceph-mgr ceph-osd ceph monmaptool ceph-authtool rbd; do
    command -v $b >/dev/null || { echo "$b not found (scripts/deps.sh ceph-mon ceph-mgr ceph-osd ceph-common)" >&2; exit 3; }
  done
  claim_release
  rm -rf "$dir"/{mon.a,mgr.x,osd.0,log,run,keyring,monmap,ceph.conf,osd0.img}
  mkdir -p "$dir"/{mon.a,mgr.x,osd.0,log,run}
  local mon2 mon1 base fsid store=${CEPH_OSD_STORE:-memstore}
  base=$(claim_ports)
  mon2=$base mon1=$((base + 1))
  fsid=$(cat /proc/sys/kernel/random/uuid)
  cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$mon2,v1:127.0.0.1:$mon1]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind port min = $((base + 2))
ms bind port max = $((base + 99))
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
keyring = $dir/keyring
run dir = $dir/run
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
crash dir = $dir/log
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
osd objectstore = $store
memstore device bytes = ${CEPH_OSD_BYTES:-2147483648}
# pages, not one bufferlist per object: a small write must not copy a whole 4 MiB object
memstore page set = true
memstore page size = 4096
bluestore block path = $dir/osd0.img
bluestore block size = ${CEPH_OSD_BYTES:-2147483648}
bluestore block create = true
bluestore cache size = 134217728
bluestore fsck on mount = false
osd memory target = 536870912
osd op num shards = 1
# a gateway killed with -9 lets go of its dataset locks (its RADOS watches) after 5 s, not 30
osd client watch timeout = 5
osd op num threads per shard = 2
mgr initial modules =
[mon.a]
mon data = $dir/mon.a
[mgr.x]
mgr data = $dir/mgr.x
keyring = $dir/mgr.x/keyring
[osd.0]
osd data = $dir/osd.0
keyring = $dir/osd.0/keyring
EOF
  ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool "$dir/keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' \
    --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon2,v1:127.0.0.1:$mon1]" "$dir/monmap" >/dev/null
  ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring"
  ceph-mon -c "$conf" -i a
  export CEPH_CONF=$conf
  local C="ceph --connect-timeout 20"
  # the fresh monitor refuses clients for a moment while it forms its quorum
  for _ in $(seq 100); do $C auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
    -o "$dir/mgr.x/keyring" 2>/dev/null && break; sleep 0.2; done
  [ -s "$dir/mgr.x/keyring" ] || $C auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' -o "$dir/mgr.x/keyring"
  ceph-mgr -c "$conf" -i x 2>>"$dir/log/daemons.err"
  local uuid; uuid=$(cat /proc/sys/kernel/random/uuid)
  local id; id=$($C osd new "$uuid")
  ceph-authtool --create-keyring "$dir/osd.0/keyring" --gen-key -n osd.$id >/dev/null
  $C auth add osd.$id osd 'allow *' mon 'allow profile osd' mgr 'allow profile osd' -i "$dir/osd.0/keyring" >/dev/null 2>&1
  ceph-osd -c "$conf" -i "$id" --mkfs --osd-uuid "$uuid" >"$dir/log/osd-mkfs.log" 2>&1 ||
    { cat "$dir/log/osd-mkfs.log" >&2; exit 1; }
  ceph-osd -c "$conf" -i "$id" 2>>"$dir/log/daemons.err"
  $C osd pool create rbd 8 8 >/dev/null 2>&1
  rbd pool init rbd
  # up means: the manager reports pool stats and every PG (of rbd and .mgr) is active+clean
  local ok=""
  for _ in $(seq 150); do
    $C -s --format json 2>/dev/null | jq -e '.mgrmap.available and .pgmap.num_pgs >= 8 and
      ([.pgmap.pgs_by_state[] | select(.state_name == "active+clean") | .count] | add) == .pgmap.num_pgs' \
      >/dev/null && { ok=1; break; }
    sleep 0.2
  done
  [ -n "$ok" ] || { echo "cluster did not become healthy" >&2; $C -s >&2; exit 1; }
  echo "ceph cluster up in $dir ($SECONDS s)"
}

case $cmd in
start) start ;;
stop) daemons_stop; claim_release ;;
env)
  [ -f "$conf" ] || { echo "no cluster in $dir" >&2; exit 1; }
  echo "export CEPH_CONF=$conf"
  echo "CEPH_MON='$(sed -n 's/^mon host = //p' "$conf")'"
  echo "CEPH_KEYRING=$dir/keyring"
  echo "CEPH_KEY=$(ceph-authtool "$dir/keyring" -n client.admin -p)"
  ;;
*) echo "usage: $0 start|stop|env DIR" >&2; exit 2 ;;
esac
