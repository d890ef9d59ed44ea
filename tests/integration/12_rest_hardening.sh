#!/bin/bash
# REST hardening (issues #11.5, #11.6, #10.6): loopback-only Host names (DNS rebinding),
# Origin and Content-Type checks against cross-site requests, 401 answered before the body
# is read, 405 with Allow, OPTIONS, security headers, a per-IP connection limit and a
# header deadline against slowloris, the descriptor limit raised at start.
set -u
. "$(dirname "$0")/lib.sh"
ulimit -Sn 512    # below the hard limit, so that raising it is seen
T=$(mktemp -d /tmp/nasd12.XXXXXX)
trap 'stop_nasd; rm -rf "$T"' EXIT
start_nasd "$T" --iscsi-portal "" --nfs-bind ""
H=http://127.0.0.1:$HTTP_PORT
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
hdrs() { curl -s -D - -o /dev/null "$@" | tr -d '\r'; }

echo "== Host names (bound to loopback)"
[ "$(code -H "Host: attacker.example:$HTTP_PORT" "$API/system")" = 403 ] || fail "foreign Host accepted"
[ "$(code -H "Host: attacker.example" "$H/")" = 403 ] || fail "foreign Host got the UI"
[ "$(code -H "Host: localhost:$HTTP_PORT" "$API/system")" = 200 ] || fail "localhost refused"
[ "$(code -H "Host: [::1]:$HTTP_PORT" "$API/system")" = 200 ] || fail "[::1] refused"

echo "== cross-site requests"
[ "$(code -X POST "$API/tokens")" = 415 ] || fail "empty POST without Content-Type accepted"
[ "$(code -X POST -H 'Content-Type: text/plain' "$API/tokens")" = 415 ] || fail "text/plain POST accepted"
[ "$(code -X POST -H 'Content-Type: application/x-www-form-urlencoded' --data 'a=b' "$API/tokens")" = 415 ] ||
    fail "form POST accepted"
[ "$(code -X POST -H 'X-Requested-With: test' "$API/tokens")" = 201 ] || fail "POST with X-Requested-With refused"
[ "$(code -X POST -H 'Content-Type: application/json' "$API/tokens")" = 201 ] || fail "empty JSON POST refused"
[ "$(code -X POST -H 'Content-Type: application/json' -H 'Origin: http://attacker.example' --data '{}' "$API/tokens")" = 403 ] ||
    fail "POST from a foreign Origin accepted"
[ "$(code -X DELETE -H 'Origin: http://attacker.example' "$API/tokens/1")" = 403 ] || fail "DELETE from a foreign Origin accepted"
[ "$(code -X POST -H 'Content-Type: application/json' -H "Origin: http://127.0.0.1:$HTTP_PORT" --data '{}' "$API/tokens")" = 201 ] ||
    fail "same-origin POST refused"

echo "== methods and headers"
h=$(hdrs -X PUT -H 'Content-Type: application/json' "$API/pools")
grep -q '^HTTP/1.1 405' <<<"$h" && grep -qi '^Allow: GET, HEAD, POST, OPTIONS' <<<"$h" || fail "405 without Allow: $h"
h=$(hdrs -X OPTIONS "$API/datasets/tank/x")
grep -q '^HTTP/1.1 204' <<<"$h" && grep -qi '^Allow: .*PATCH, DELETE' <<<"$h" || fail "OPTIONS: $h"
h=$(hdrs -X POST -H 'Content-Type: application/json' "$H/index.html")
grep -q '^HTTP/1.1 405' <<<"$h" && grep -qi '^Allow: GET, HEAD, OPTIONS' <<<"$h" || fail "static 405: $h"
for u in "$H/" "$API/system" "$API/nothing"; do
    h=$(hdrs "$u")
    grep -qi '^X-Frame-Options: DENY' <<<"$h" || fail "$u without X-Frame-Options"
    grep -qi "^Content-Security-Policy: default-src 'self'" <<<"$h" || fail "$u without CSP"
    grep -qi '^X-Content-Type-Options: nosniff' <<<"$h" || fail "$u without nosniff"
done

echo "== paths no name can have"
for p in 'pools/tank%00x' 'pools/a%2Fb' 'pools/%ff' 'pools/a%0Ab' 'pools/a%25b'; do
    [ "$(code "$API/$p")" = 400 ] || fail "$p not refused"
done
grep -q '"bad_path"' <<<"$(curl -s "$API/pools/%ff")" || fail "no JSON error for a non-ASCII path"
[ "$(code "$API/pools/$(printf 'a%.0s' $(seq 1100))")" = 414 ] || fail "long path not refused"
[ "$(code "$API/pools/a%2Db")" = 404 ] || fail "an escaped '-' is not decoded"

echo "== descriptor limit"
soft=$(awk '/Max open files/ {print $4}' /proc/$NASD_PID/limits)
hard=$(awk '/Max open files/ {print $5}' /proc/$NASD_PID/limits)
[ "$hard" = unlimited ] || [ "$hard" -gt 512 ] || fail "hard limit $hard: cannot test"
[ "$soft" = "$hard" ] || fail "RLIMIT_NOFILE soft $soft, hard $hard: not raised"

echo "== per-IP limit and header deadline"
python3 - "$HTTP_PORT" <<'PY' || fail "slowloris"
import socket, sys, time, urllib.request
port = int(sys.argv[1])
def probe():
    return urllib.request.urlopen("http://127.0.0.1:%d/api/v1/system" % port, timeout=3).status
held = []
for i in range(200):                   # one attacker address trickling headers
    s = socket.socket(); s.bind(("127.0.0.2", 0)); s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port)); s.send(b"GET /api/v1/system HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        held.append(s)
    except OSError:
        pass
time.sleep(0.5)
def open_ones():
    n = 0
    for s in held:
        s.setblocking(False)
        try:
            n += s.recv(1) != b""      # b"": closed by the server
        except BlockingIOError:
            n += 1
        except OSError:
            pass
    return n
n = open_ones()
print("attacker: 200 connections, %d kept open" % n)
assert n <= 32, "per-IP limit not applied (%d open)" % n
assert probe() == 200, "API unreachable during the flood"
t0 = time.time()
while time.time() - t0 < 20 and open_ones():
    for s in held:
        try: s.send(b"X")          # one header byte a second restarts an idle timeout
        except OSError: pass
    assert probe() == 200
    time.sleep(1)
left = open_ones()
print("after %.0f s of trickled headers: %d still open" % (time.time() - t0, left))
assert left == 0, "trickled headers kept connections past the header deadline"
PY

echo "== client strings are escaped in the log"
curl -s -o /dev/null -X POST -H 'Content-Type: application/json' \
    --data '{"description":"x\n00:00:00.000 error forged\u001b[2J"}' "$API/tokens"
grep -q '^00:00:00.000 error forged' "$T/nasd.log" && fail "token description injected a log line"
grep -q 'x\\x0a00:00:00.000 error forged\\x1b\[2J' "$T/nasd.log" || fail "escaped description not logged"

echo "== out of descriptors: REST backs off, the log stays small"
prlimit --pid $NASD_PID --nofile=48:48 || fail "prlimit"
logsize=$(stat -c %s "$T/nasd.log")
python3 - "$HTTP_PORT" <<'PY' || fail "EMFILE flood"
import socket, sys, time
socks = []
for a in range(2, 6):                  # 4 addresses x 30: past the 48 descriptors
    for _ in range(30):
        s = socket.socket(); s.setblocking(False); s.bind(("127.0.0.%d" % a, 0))
        try: s.connect(("127.0.0.1", int(sys.argv[1])))
        except BlockingIOError: pass
        socks.append(s)
time.sleep(3)
for s in socks: s.close()
PY
grown=$(( $(stat -c %s "$T/nasd.log") - logsize ))
echo "log grew by $grown bytes in 3 s at EMFILE"
[ "$grown" -lt 20000 ] || fail "log flood at EMFILE: $grown bytes"
sleep 1
[ "$(code "$API/system")" = 200 ] || fail "API not answering after EMFILE"

echo "== auth: 401 before the body is read"
stop_nasd
"$NASD" --db "$T/nasd.db" --create-token t >/dev/null
start_nasd "$T" --iscsi-portal "" --nfs-bind "" --auth
python3 - "$HTTP_PORT" <<'PY' || fail "401 before 413"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"POST /api/v1/pools HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          b"Content-Length: 50000000\r\n\r\n")       # headers only: the body never comes
status = s.recv(4096).split(b"\r\n")[0]
print(status.decode())
assert b" 401 " in status, status
PY
echo "12_rest_hardening: ok"
