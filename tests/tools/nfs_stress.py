#!/usr/bin/env python3
"""Hostile NFS and REST traffic for tests/integration/37_nfs_stress.sh.

  nfs_stress.py HOST NFSPORT MOUNTPORT HTTPPORT EXPORT FILE SECONDS PID

For SECONDS, from attacker addresses 127.0.0.2-127.0.0.9: waves of NFS and MOUNT
connections that send garbage, half a record, or a pipeline of 1 MiB READs of FILE
(a file in EXPORT) and never read the replies, some closed with a reset; REST
connections that trickle headers, send garbage or reset. Meanwhile from 127.0.0.1
GET /api/v1/system must answer 200 within 2 s every 0.2 s, and the daemon's RSS (PID)
is sampled. Prints "max_rss_kb N", "rest_checks N", "rest_failures N", "conns N".
"""
import os, random, socket, struct, sys, threading, time

host, nfs_port, mnt_port, http_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
export, fname, seconds, pid = sys.argv[5], sys.argv[6], float(sys.argv[7]), int(sys.argv[8])
ATTACKERS = ["127.0.0.%d" % i for i in range(2, 10)]

def u32(v): return struct.pack(">I", v & 0xffffffff)
def opaque(b):
    b = b.encode() if isinstance(b, str) else b
    return u32(len(b)) + b + b"\0" * ((4 - len(b) % 4) % 4)
def call(xid, prog, vers, proc, args=b""):
    cred = u32(1) + opaque(u32(0) + opaque("stress") + u32(0) + u32(0) + u32(0))
    body = u32(xid) + u32(0) + u32(2) + u32(prog) + u32(vers) + u32(proc) + cred + u32(0) + u32(0) + args
    return u32(0x80000000 | len(body)) + body
def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: raise EOFError
        b += c
    return b
def rpc(port, prog, vers, proc, args):
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(call(1, prog, vers, proc, args))
    rec = recv_exact(s, struct.unpack(">I", recv_exact(s, 4))[0] & 0x7fffffff)
    s.close()
    vlen = struct.unpack(">I", rec[16:20])[0]
    return rec[24 + ((vlen + 3) & ~3):]        # past accept_stat
def get_fh(body, off=0):
    n = struct.unpack(">I", body[off:off + 4])[0]
    return body[off + 4:off + 4 + n]

root = rpc(mnt_port, 100005, 3, 1, opaque(export))
assert struct.unpack(">I", root[:4])[0] == 0, "MNT failed"
root_fh = get_fh(root, 4)
look = rpc(nfs_port, 100003, 3, 3, opaque(root_fh) + opaque(fname))
assert struct.unpack(">I", look[:4])[0] == 0, "LOOKUP failed"
file_fh = get_fh(look, 4)
reads = b"".join(call(100 + i, 100003, 3, 6, opaque(file_fh) + struct.pack(">QI", (i % 8) << 20, 1 << 20))
                 for i in range(200))

stop = time.time() + seconds
stats = {"max_rss_kb": 0, "rest_checks": 0, "rest_failures": 0, "conns": 0}
lock = threading.Lock()

def dial(port, src, timeout=2):
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect((host, port))
    return s
def reset(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()

def nfs_attacker(n):
    rnd = random.Random(n)
    held = []
    while time.time() < stop:
        src = rnd.choice(ATTACKERS)
        try:
            s = dial(rnd.choice([nfs_port, nfs_port, mnt_port]), src)
            kind = rnd.randrange(4)
            if kind == 0: s.sendall(os.urandom(rnd.randrange(1, 2000)))
            elif kind == 1: s.sendall(u32(0x80000000 | 5000) + os.urandom(100))     # half a record
            else: s.sendall(reads)                                                  # never read
            with lock: stats["conns"] += 1
            if rnd.random() < 0.5: reset(s)
            else: held.append(s)
        except OSError:
            pass
        if len(held) > 60:
            for s in held[:20]: s.close()
            del held[:20]
        time.sleep(0.01)
    for s in held: s.close()

def rest_attacker(n):
    rnd = random.Random(1000 + n)
    held = []
    while time.time() < stop:
        try:
            s = dial(http_port, rnd.choice(ATTACKERS))
            kind = rnd.randrange(3)
            if kind == 0: s.sendall(b"GET /api/v1/system HTTP/1.1\r\nHost: 127.0.0.1\r\nX-a: ")
            elif kind == 1: s.sendall(os.urandom(rnd.randrange(1, 3000)))
            else: s.sendall(b"GET /api/v1/pools HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 50)  # never read
            with lock: stats["conns"] += 1
            if rnd.random() < 0.3: reset(s)
            else: held.append(s)
        except OSError:
            pass
        for s in held:
            try: s.send(b"a")
            except OSError: pass
        if len(held) > 40:
            for s in held[:20]: s.close()
            del held[:20]
        time.sleep(0.02)
    for s in held: s.close()

def checker():
    while time.time() < stop:
        ok = False
        try:
            s = socket.create_connection((host, http_port), timeout=2)
            s.settimeout(2)
            s.sendall(b"GET /api/v1/system HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            ok = s.recv(64).startswith(b"HTTP/1.1 200")
            s.close()
        except OSError:
            pass
        with lock:
            stats["rest_checks"] += 1
            stats["rest_failures"] += not ok
        try:
            for line in open("/proc/%d/status" % pid):
                if line.startswith("RssAnon:"):   # not the pool's mapped member pages
                    with lock: stats["max_rss_kb"] = max(stats["max_rss_kb"], int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.2)

threads = [threading.Thread(target=nfs_attacker, args=(i,)) for i in range(6)]
threads += [threading.Thread(target=rest_attacker, args=(i,)) for i in range(3)]
threads.append(threading.Thread(target=checker))
for t in threads: t.start()
for t in threads: t.join()
for k, v in stats.items(): print(k, v)
