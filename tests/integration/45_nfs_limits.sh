#!/bin/bash
# NFS descriptor, memory and log hardening (issue #11.5, .7, .8) against nfs_serve:
# connection caps per client address and in all, idle connections closed, clients
# outside every export's list refused at connect, a pipelining client bounded, EMFILE in accept backs off with a
# bounded log instead of a spin, the MOUNT table stays one entry per path whatever
# its spelling, and a MOUNT path cannot inject lines into the log.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/integration/lib.sh
B=${B:-build}
SERVE=$B/tools/nfs_serve
P="python3 tests/tools/rpcprobe.py"
[ -x "$SERVE" ] || { echo "FAIL: missing $SERVE (run make all)"; exit 1; }
TMP=$(mktemp -d /tmp/nfs45.XXXXXX)
PID=
cleanup() {
    if [ -n "$PID" ]; then kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; tail -20 "$TMP/log"; exit 1; }
fds() { ls /proc/$PID/fd | wc -l; }
mkdir -p "$TMP/exp"

echo "== connection caps and idle timeout"
NP=$(free_port); MP=$(free_port $NP)
nfs_serve_up "$TMP" --dir "$TMP/exp" --path /export --nfsport $NP --mountport $MP --clients 127.0.0.0/8 \
    --max-conns 12 --max-conns-per-addr 8 --idle-timeout 3
base=$(fds)
n=$($P hold 127.0.0.1 $NP 20 127.0.0.1) || fail "hold"
[ "$n" = 8 ] || fail "20 connections from one address: $n left open, want 8 (per-address cap)"
n=$($P hold 127.0.0.1 $NP 20 127.0.0.2) || fail "hold"
[ "$n" = 8 ] || fail "second address: $n open, want 8"
# both addresses at once: 8 + 4 = the total cap of 12
for _ in $(seq 100); do [ "$(fds)" -le "$base" ] && break; sleep 0.05; done   # the closes above reached the server
# the first address's 8 are accepted before the third address dials (a fixed pause lost that
# race on a loaded machine: the third address took 8 and left the first 4)
$P hold 127.0.0.1 $NP 8 127.0.0.1 2 > "$TMP/h1" & h1=$!   # 2 s: below the idle timeout
for _ in $(seq 100); do [ "$(fds)" -ge $((base + 8)) ] && break; sleep 0.05; done
[ "$(fds)" -ge $((base + 8)) ] || fail "the server did not accept the first address's 8 connections"
n=$($P hold 127.0.0.1 $NP 20 127.0.0.3)
wait $h1
[ "$(cat "$TMP/h1")" = 8 ] || fail "first address held $(cat "$TMP/h1"), want 8"
[ "$n" = 4 ] || fail "with 8 connections held, a third address got $n, want 4 (total cap 12)"
$P null 127.0.0.1 $NP 100003 3 >/dev/null || fail "NULL after the caps"
$P closed 127.0.0.1 $NP 6 || fail "an idle connection was not closed after the 3 s timeout"
sleep 0.5
[ "$(fds)" -le "$base" ] || fail "descriptors $(fds), baseline $base"
nfs_serve_down

echo "== IPv6: one /64 is one client for the per-address cap"
# A host usually holds a whole /64 (privacy addresses): counted per full address, each new
# address got 8 more connections. Root only (addresses on lo), and where IPv6 works.
V6=fd00:6e61:7364:1
if [ "$(id -u)" = 0 ] && ip -6 addr add $V6::1/64 dev lo nodad 2>/dev/null; then
    ip -6 addr add $V6::a/64 dev lo nodad; ip -6 addr add $V6::b/64 dev lo nodad
    trap 'ip -6 addr del $V6::1/64 dev lo; ip -6 addr del $V6::a/64 dev lo; ip -6 addr del $V6::b/64 dev lo; cleanup' EXIT
    nfs_serve_up "$TMP" --dir "$TMP/exp" --path /export --nfsport $NP --mountport $MP --bind $V6::1 \
        --clients $V6::/64 --max-conns 64 --max-conns-per-addr 8
    base=$(fds)
    $P hold $V6::1 $NP 8 $V6::a 2 > "$TMP/h1" & h1=$!
    for _ in $(seq 100); do [ "$(fds)" -ge $((base + 8)) ] && break; sleep 0.05; done
    n=$($P hold $V6::1 $NP 20 $V6::b) || fail "hold from $V6::b"
    wait $h1
    [ "$(cat "$TMP/h1")" = 8 ] || fail "$V6::a held $(cat "$TMP/h1"), want 8"
    [ "$n" = 0 ] || fail "another address of the same /64 got $n more connections, want 0"
    nfs_serve_down
    ip -6 addr del $V6::1/64 dev lo; ip -6 addr del $V6::a/64 dev lo; ip -6 addr del $V6::b/64 dev lo
    trap cleanup EXIT
else
    echo "skip: not root, or no IPv6 on lo"
fi

echo "== client list checked at connect"
nfs_serve_up "$TMP" --dir "$TMP/exp" --path /export --nfsport $NP --mountport $MP --clients 10.0.0.0/8
$P closed 127.0.0.1 $NP 1 || fail "NFS connection from a client no export admits stayed open"
$P closed 127.0.0.1 $MP 1 || fail "MOUNT connection from a client no export admits stayed open"
grep -q "no export admits this client" "$TMP/log" || fail "refusal not logged"
nfs_serve_down

echo "== EMFILE in accept"
: > "$TMP/log"
prlimit --nofile=40 -- "$SERVE" --dir "$TMP/exp" --path /export --nfsport $NP --mountport $MP \
    > "$TMP/out" 2> "$TMP/log" &
PID=$!
for _ in $(seq 100); do grep -q '^ready' "$TMP/out" && break; sleep 0.05; done
grep -q '^ready' "$TMP/out" || fail "nfs_serve under prlimit did not start"
python3 - "$NP" <<'PY' || fail "EMFILE flood client"
import socket, sys, time
socks = []
for _ in range(150):
    s = socket.socket(); s.setblocking(False)
    try: s.connect(("127.0.0.1", int(sys.argv[1])))
    except BlockingIOError: pass
    socks.append(s)
time.sleep(3)                   # the server runs out of descriptors for these 3 s
for s in socks: s.close()
PY
lines=$(grep -c "accept" "$TMP/log")
bytes=$(stat -c %s "$TMP/log")
echo "log after 3 s at EMFILE: $lines accept lines, $bytes bytes"
[ "$lines" -ge 1 ] || fail "EMFILE was never reported"
[ "$bytes" -lt 20000 ] || fail "log flood at EMFILE: $bytes bytes"
sleep 0.5
$P null 127.0.0.1 $NP 100003 3 >/dev/null || fail "NULL after EMFILE"
nfs_serve_down

echo "== a client that sends calls without reading replies"
# 16 connections pipeline 4 MiB of GETATTRs each: a connection's calls in the server are
# bounded (256), the rest waits in the socket. Before, every call read (16 x 256 KiB per
# event) was queued: +394 MB, and another client waited 1.4 s behind them.
nfs_serve_up "$TMP" --dir "$TMP/exp" --path /export --nfsport $NP --mountport $MP
out=$(timeout 120 $P flood 127.0.0.1 $NP $MP /export 16 4 $PID) || fail "flood: $out"
echo "$out"
grown=$(echo "$out" | sed -n 's/.*rss +\([0-9-]*\) MB/\1/p'); lat=$(echo "$out" | sed -n 's/getattr \([0-9.]*\) s.*/\1/p')
[ "$grown" -lt 64 ] || fail "server memory grew by $grown MB under the flood"
[ -n "$lat" ] && [ -n "$grown" ] || fail "flood printed no figures: $out"
awk -v l="$lat" 'BEGIN { exit !(l < 1.0) }' || fail "another client's GETATTR took $lat s under the flood"
$P null 127.0.0.1 $NP 100003 3 >/dev/null || fail "NULL after the flood"
nfs_serve_down

echo "== MOUNT table and log injection"
: > "$TMP/log"
nfs_serve_up "$TMP" --dir "$TMP/exp" --path /export --nfsport $NP --mountport $MP
for p in /export /export/ //export /export/. /export/./ /export//. /export/././/; do
    [ "$($P mnt 127.0.0.1 $MP "$p")" = 0 ] || fail "MNT $p"
done
[ "$($P mnt 127.0.0.1 $MP /export/..)" = 13 ] || fail "MNT /export/.. not refused with MNT3ERR_ACCES"
[ "$($P dump 127.0.0.1 $MP)" = 1 ] || fail "DUMP lists $($P dump 127.0.0.1 $MP) entries for 7 spellings of one path"
$P mnt 127.0.0.1 $MP $'/nope\n00:00:00.000 error forged line\e[2J' >/dev/null
grep -q '^00:00:00.000 error forged' "$TMP/log" && fail "MOUNT path injected a log line"
grep -q 'nope\\x0a00:00:00.000 error forged line\\x1b\[2J' "$TMP/log" || fail "escaped path not in the log"
nfs_serve_down
echo "45_nfs_limits: ok"
