#!/usr/bin/env python3
"""Raw ONC RPC over TCP for the NFS hardening tests (no client library hides what the
server does with odd input). Subcommands print one result line; exit 0 if it holds.

  rpcprobe.py null HOST PORT PROG VERS              NULL call answered
  rpcprobe.py mnt HOST PORT PATH                    prints the mountstat3 of MNT PATH
  rpcprobe.py dump HOST PORT                        prints the number of DUMP entries
  rpcprobe.py hold HOST PORT N [SRC [SECONDS]]      opens N connections (from SRC), prints how many
                                                    the server left open after SECONDS (1)
  rpcprobe.py closed HOST PORT SECONDS              a silent connection is closed by the server
                                                    within SECONDS
  rpcprobe.py linkrace HOST PORT MPORT PATH N        N rounds of REMOVE of a 1 MiB file raced by a LINK
                                                    of it from another connection; prints the export's
                                                    available bytes and the bytes the file still uses
  rpcprobe.py writestall HOST PORT MPORT PATH TRIGGER SECS  UNSTABLE WRITEs one at a time while TRIGGER exists
                                                    (slow syncs, as for stall) and another client's NULLs;
                                                    prints the slowest NULL
  rpcprobe.py stall HOST PORT MPORT PATH TRIGGER [K] a COMMIT while the file TRIGGER exists (a server run with
                                                    tests/shims/slow_sync.c then syncs slowly); meanwhile another
                                                    K connections' GETATTRs (they wait for the COMMIT's lock) and a
                                                    third's NULL (it waits for nothing); prints the three latencies
  rpcprobe.py flood HOST PORT MPORT PATH N MB PID   N connections each send MB MiB of GETATTR calls
                                                    without reading replies; prints another client's
                                                    GETATTR latency and the server's VmRSS growth (MB)
"""
import os, socket, struct, sys, time, select, threading

PROG_MOUNT, PROG_NFS, PROG_PMAP = 100005, 100003, 100000

def call(xid, prog, vers, proc, args=b"", cred=None):
    none = struct.pack(">II", 0, 0)      # AUTH_NONE
    body = struct.pack(">IIIIII", xid, 0, 2, prog, vers, proc) + (cred or none) + none + args
    return struct.pack(">I", 0x80000000 | len(body)) + body

def xdr_string(s):
    b = s.encode("latin-1") if isinstance(s, str) else s
    return struct.pack(">I", len(b)) + b + b"\0" * ((4 - len(b) % 4) % 4)

def dial(host, port, src=None, timeout=5):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if src:
        s.bind((src, 0))
    s.connect((host, port))
    return s

def recv_exact(s, n):
    out = b""
    while len(out) < n:
        c = s.recv(n - len(out))
        if not c:
            raise EOFError("closed")
        out += c
    return out

def reply(s):
    mark = struct.unpack(">I", recv_exact(s, 4))[0]
    rec = recv_exact(s, mark & 0x7fffffff)
    xid, mtype, stat = struct.unpack(">III", rec[:12])
    if stat != 0:
        return stat, b""
    vlen = struct.unpack(">I", rec[16:20])[0]
    off = 20 + ((vlen + 3) & ~3)
    astat = struct.unpack(">I", rec[off:off + 4])[0]
    return astat, rec[off + 4:]

def rpc(host, port, prog, vers, proc, args=b""):
    s = dial(host, port)
    s.sendall(call(1, prog, vers, proc, args))
    r = reply(s)
    s.close()
    return r

def auth_sys(uid, gid):
    body = struct.pack(">I", 0) + xdr_string("t") + struct.pack(">IIII", uid, gid, 1, gid)
    return struct.pack(">I", 1) + xdr_string(body)

def mount_fh(host, mport, path):
    st, body = rpc(host, mport, PROG_MOUNT, 3, 1, xdr_string(path))
    if st != 0 or struct.unpack(">I", body[:4])[0] != 0:
        raise SystemExit("MNT %s failed" % path)
    return body[4:8 + struct.unpack(">I", body[4:8])[0]]    # the opaque handle, length included

def pad(b):
    return b + b"\0" * ((4 - len(b) % 4) % 4)

def linkrace(host, port, mport, path, rounds):
    root = mount_fh(host, mport, path)
    cred = auth_sys(1000, 1000)
    a, b = dial(host, port, timeout=30), dial(host, port, timeout=30)
    xid = [100]
    def nfs(sock, proc, args):
        xid[0] += 1
        sock.sendall(call(xid[0], PROG_NFS, 3, proc, args, cred))
        return reply(sock)
    def fresh(name):   # CREATE UNCHECKED 0644, then 1 MiB
        st, body = nfs(a, 8, pad(root) + xdr_string(name) + struct.pack(">IIIIIIIIII", 0, 1, 0o644, 0, 0, 0, 0, 0, 0, 0))
        if st != 0 or body[:8] != struct.pack(">II", 0, 1):    # NFS3_OK, a handle follows
            raise SystemExit("CREATE %s failed" % name)
        fh = body[8:12 + struct.unpack(">I", body[8:12])[0]]
        nfs(a, 7, pad(fh) + struct.pack(">QII", 0, 1 << 20, 0) + xdr_string(b"Z" * (1 << 20)))
        return fh
    def used(fh):      # GETATTR: fattr3's used, or None when the file is gone
        st, body = nfs(a, 1, pad(fh))
        return struct.unpack(">Q", body[32:40])[0] if st == 0 and body[:4] == b"\0" * 4 else None
    cur, fh = "f0", fresh("f0")
    for i in range(rounds):
        new = "f%d" % (i + 1)
        xid[0] += 2
        rm = call(xid[0] - 1, PROG_NFS, 3, 12, pad(root) + xdr_string(cur), cred)
        ln = call(xid[0], PROG_NFS, 3, 15, pad(fh) + pad(root) + xdr_string(new), cred)
        t = threading.Thread(target=b.sendall, args=(ln,))
        t.start(); a.sendall(rm); t.join()
        reply(a); reply(b)
        cur = new
        if used(fh) is None:   # the REMOVE came first: no race this round
            fh = fresh(cur)
    st, body = nfs(a, 18, pad(root))   # FSSTAT: post_op_attr, tbytes, fbytes, abytes
    off = 8 + (84 if struct.unpack(">I", body[4:8])[0] else 0)
    avail = struct.unpack(">Q", body[off + 16:off + 24])[0]
    print("avail %d used %d" % (avail, used(fh) or 0))
    return st == 0

def stall(host, port, mport, path, trigger, k=1):
    root = pad(mount_fh(host, mport, path))
    cred = auth_sys(0, 0)
    a, c = dial(host, port, timeout=60), dial(host, port, timeout=60)
    bs = [dial(host, port, timeout=60) for _ in range(k)]
    st, body = nfs_call(a, 8, root + xdr_string("s") + struct.pack(">IIIIIIIIII", 0, 1, 0o644, 0, 0, 0, 0, 0, 0, 0), cred)
    if st != 0 or body[:8] != struct.pack(">II", 0, 1):
        raise SystemExit("CREATE s failed")
    fh = pad(body[8:12 + struct.unpack(">I", body[8:12])[0]])
    nfs_call(a, 7, fh + struct.pack(">QII", 0, 4096, 0) + xdr_string(b"Z" * 4096), cred)   # UNSTABLE
    open(trigger, "w").close()   # from now on the server's syncs are slow
    t = {}
    def timed(sock, name, msg):
        t0 = time.time()
        sock.sendall(msg)
        reply(sock)
        t[name] = time.time() - t0
    ths = [threading.Thread(target=timed, args=(a, "commit", call(5, PROG_NFS, 3, 21, fh + struct.pack(">QI", 0, 0), cred)))]
    ths[0].start()
    time.sleep(0.2)
    for i, b in enumerate(bs):   # each waits for the COMMIT's lock, on a worker of its own
        ths.append(threading.Thread(target=timed, args=(b, "getattr%d" % i, call(6, PROG_NFS, 3, 1, root, cred))))
        ths[-1].start()
        time.sleep(0.05)
    time.sleep(0.2)
    timed(c, "null", call(7, PROG_NFS, 3, 0))
    for th in ths:
        th.join()
    os.unlink(trigger)
    print("commit %.3f s, getattr %.3f s, null %.3f s" % (t["commit"], max(t["getattr%d" % i] for i in range(k)), t["null"]))
    return True

def writestall(host, port, mport, path, trigger, secs):
    """One client's UNSTABLE 64 KiB WRITEs, one at a time (the server's reader thread may
    run them itself), while the server's syncs are slow; another client's NULLs."""
    root = pad(mount_fh(host, mport, path))
    cred = auth_sys(0, 0)
    a, c = dial(host, port, timeout=60), dial(host, port, timeout=60)
    st, body = nfs_call(a, 8, root + xdr_string("w") + struct.pack(">IIIIIIIIII", 0, 1, 0o644, 0, 0, 0, 0, 0, 0, 0), cred)
    if st != 0 or body[:8] != struct.pack(">II", 0, 1):
        raise SystemExit("CREATE w failed")
    fh = pad(body[8:12 + struct.unpack(">I", body[8:12])[0]])
    open(trigger, "w").close()
    stop = time.time() + secs
    blk = xdr_string(b"W" * 65536)
    def writes():
        i = 0
        while time.time() < stop:
            nfs_call(a, 7, fh + struct.pack(">QII", (i % 512) << 16, 65536, 0) + blk, cred)
            i += 1
    th = threading.Thread(target=writes)
    th.start()
    worst, n = 0.0, 0
    while time.time() < stop:
        t0 = time.time()
        c.sendall(call(9, PROG_NFS, 3, 0))
        reply(c)
        worst = max(worst, time.time() - t0)
        n += 1
        time.sleep(0.01)
    th.join()
    os.unlink(trigger)
    print("nulls %d, slowest %.3f s" % (n, worst))
    return True

def nfs_call(sock, proc, args, cred, xid=[50]):
    xid[0] += 1
    sock.sendall(call(xid[0], PROG_NFS, 3, proc, args, cred))
    return reply(sock)

def is_closed(s, wait):
    r, _, _ = select.select([s], [], [], wait)
    if not r:
        return False
    try:
        return s.recv(1) == b""
    except OSError:
        return True

def main(a):
    cmd, host, port = a[0], a[1], int(a[2])
    if cmd == "null":
        st, _ = rpc(host, port, int(a[3]), int(a[4]), 0)
        print("null", st)
        return st == 0
    if cmd == "mnt":
        st, body = rpc(host, port, PROG_MOUNT, 3, 1, xdr_string(a[3]))
        print(struct.unpack(">I", body[:4])[0] if st == 0 else "rpc-error-%d" % st)
        return st == 0
    if cmd == "dump":
        st, body = rpc(host, port, PROG_MOUNT, 3, 2)
        n, off = 0, 0
        while struct.unpack(">I", body[off:off + 4])[0] == 1:
            off += 4
            for _ in range(2):
                ln = struct.unpack(">I", body[off:off + 4])[0]
                off += 4 + ((ln + 3) & ~3)
            n += 1
        print(n)
        return True
    if cmd == "hold":
        socks = []
        for _ in range(int(a[3])):
            try:
                socks.append(dial(host, port, a[4] if len(a) > 4 else None))
            except OSError:
                pass
        time.sleep(float(a[5]) if len(a) > 5 else 1)
        print(sum(1 for s in socks if not is_closed(s, 0)))
        for s in socks:
            s.close()
        return True
    if cmd == "closed":
        s = dial(host, port)
        t0 = time.time()
        ok = is_closed(s, float(a[3]))
        print("closed after %.1f s" % (time.time() - t0) if ok else "still open")
        return ok
    if cmd == "linkrace":
        return linkrace(host, port, int(a[3]), a[4], int(a[5]))
    if cmd == "stall":
        return stall(host, port, int(a[3]), a[4], a[5], int(a[6]) if len(a) > 6 else 1)
    if cmd == "writestall":
        return writestall(host, port, int(a[3]), a[4], a[5], float(a[6]))
    if cmd == "flood":
        mport, path, n, mb, pid = int(a[3]), a[4], int(a[5]), float(a[6]), int(a[7])
        fh = pad(mount_fh(host, mport, path))
        one = call(0, PROG_NFS, 3, 1, fh)
        count = int(mb * (1 << 20)) // len(one)
        # distinct xids: the duplicate request cache must not absorb them
        blob = b"".join(one[:4] + struct.pack(">I", 0x10000000 + i) + one[8:] for i in range(count))
        def rss():
            for l in open("/proc/%d/status" % pid):
                if l.startswith("VmRSS"):
                    return int(l.split()[1]) // 1024
        base = rss()
        socks = [dial(host, port, timeout=120) for _ in range(n)]
        def pump(k):
            try:
                k.sendall(blob)
            except OSError:
                pass
        ths = [threading.Thread(target=pump, args=(k,)) for k in socks]
        for t in ths:
            t.start()
        time.sleep(1.0)
        v = dial(host, port, timeout=300)
        t0 = time.time()
        v.sendall(call(7, PROG_NFS, 3, 1, fh))
        st, _ = reply(v)
        lat = time.time() - t0
        grown = rss() - base
        print("getattr %.3f s, rss +%d MB" % (lat, grown))
        for k in socks:
            k.close()
        for t in ths:
            t.join()
        return st == 0
    raise SystemExit(__doc__)

if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:]) else 1)
