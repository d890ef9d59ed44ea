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
"""
import socket, struct, sys, time, select

PROG_MOUNT, PROG_NFS, PROG_PMAP = 100005, 100003, 100000

def call(xid, prog, vers, proc, args=b""):
    cred = struct.pack(">II", 0, 0)      # AUTH_NONE
    body = struct.pack(">IIIIII", xid, 0, 2, prog, vers, proc) + cred + cred + args
    return struct.pack(">I", 0x80000000 | len(body)) + body

def xdr_string(s):
    b = s.encode("latin-1") if isinstance(s, str) else s
    return struct.pack(">I", len(b)) + b + b"\0" * ((4 - len(b) % 4) % 4)

def dial(host, port, src=None, timeout=5):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
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
    raise SystemExit(__doc__)

if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:]) else 1)
