#!/bin/sh
# Seed corpus for the nfs_rpc harness: record-marked RPC call streams for every MOUNT,
# portmapper and NFSv3 procedure; "\0\0\0\4@FHn" stands for handle n (0: the root).
exec python3 - "$1" <<'PY'
import struct, sys, os
out = sys.argv[1]
def u32(v): return struct.pack(">I", v & 0xffffffff)
def u64(v): return struct.pack(">Q", v)
def opaque(b):
    b = b.encode() if isinstance(b, str) else b
    return u32(len(b)) + b + b"\0" * ((4 - len(b) % 4) % 4)
def fh(n): return b"\0\0\0\4@FH" + bytes([n])
def auth_sys(uid, gid):
    body = u32(1) + opaque("fuzzhost") + u32(uid) + u32(gid) + u32(1) + u32(gid)
    return u32(1) + opaque(body)
xid = [1]
def call(prog, vers, proc, args=b"", uid=0):
    xid[0] += 1
    body = u32(xid[0]) + u32(0) + u32(2) + u32(prog) + u32(vers) + u32(proc) + auth_sys(uid, uid) + u32(0) + u32(0) + args
    return u32(0x80000000 | len(body)) + body
NFS, MNT, PMAP = 100003, 100005, 100000
sattr_mode = u32(1) + u32(0o644) + u32(0) + u32(0) + u32(0) + u32(0) + u32(0)
sattr_none = u32(0) * 6
seeds = {
  "null": call(NFS, 3, 0) + call(MNT, 3, 0) + call(PMAP, 2, 0),
  "mount": call(MNT, 3, 1, opaque("/export")) + call(MNT, 3, 2) + call(MNT, 3, 5) + call(MNT, 3, 3, opaque("/export//./")) + call(MNT, 3, 4),
  "portmap": call(PMAP, 2, 3, u32(NFS) + u32(3) + u32(6) + u32(0)) + call(PMAP, 2, 4) + call(PMAP, 3, 3, u32(NFS) + u32(3) + opaque("tcp") + opaque("") + opaque("")),
  "getattr": call(NFS, 3, 1, fh(0)) + call(NFS, 3, 18, fh(0)) + call(NFS, 3, 19, fh(0)) + call(NFS, 3, 20, fh(0)) + call(NFS, 3, 4, fh(0) + u32(0x3f)),
  "create_write_read": call(NFS, 3, 8, fh(0) + opaque("f") + u32(0) + sattr_mode) +
      call(NFS, 3, 7, fh(1) + u64(0) + u32(5) + u32(2) + opaque("hello")) +
      call(NFS, 3, 6, fh(1) + u64(0) + u32(4096)) + call(NFS, 3, 21, fh(1) + u64(0) + u32(0)) +
      call(NFS, 3, 2, fh(1) + sattr_mode + u32(0)),
  "dirs": call(NFS, 3, 9, fh(0) + opaque("d") + sattr_mode) + call(NFS, 3, 3, fh(0) + opaque("d")) +
      call(NFS, 3, 16, fh(0) + u64(0) + u64(0) + u32(4096)) + call(NFS, 3, 17, fh(0) + u64(0) + u64(0) + u32(4096) + u32(65536)) +
      call(NFS, 3, 14, fh(0) + opaque("d") + fh(0) + opaque("e")) + call(NFS, 3, 13, fh(0) + opaque("e")),
  "links": call(NFS, 3, 10, fh(0) + opaque("l") + sattr_none + opaque("target")) + call(NFS, 3, 5, fh(1)) +
      call(NFS, 3, 8, fh(0) + opaque("g") + u32(0) + sattr_mode) + call(NFS, 3, 15, fh(2) + fh(0) + opaque("h")) +
      call(NFS, 3, 12, fh(0) + opaque("h")) + call(NFS, 3, 11, fh(0) + opaque("p") + u32(7) + sattr_mode),
  "user": call(NFS, 3, 8, fh(0) + opaque("u") + u32(1) + sattr_mode, uid=1000) + call(NFS, 3, 4, fh(1) + u32(0x3f), uid=1000),
  "fragments": u32(12) + u32(7) + u32(0) + u32(2) + u32(0x80000000 | 28) + u32(NFS) + u32(3) + u32(0) + u32(0) + u32(0) + u32(0) + u32(0),
}
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
PY
