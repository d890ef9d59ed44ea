#!/bin/sh
# Seed corpus for the iscsi_conn harness: whole initiator byte streams (login to the
# harness target iqn.2026-12.fuzz:t or discovery, then text, SCSI commands with R2T'd
# Data-Out, TMF, NOP, logout), some with CRC32C digests; and writes with immediate data
# to iqn.2026-12.fuzz:imm. Written by python3.
d=$1
command -v python3 >/dev/null || { echo "seeds.sh: python3 needed" >&2; exit 1; }
python3 - "$d" <<'PY'
import struct, sys, os
out = sys.argv[1]
def crc32c(b, crc=0):
    crc ^= 0xffffffff
    for x in b:
        crc ^= x
        for _ in range(8): crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff
class S:
    def __init__(s): s.buf = b''; s.itt = 1; s.cmdsn = 1; s.dig = False
    def pdu(s, op, b1, fields=b'', data=b'', imm=True):
        bhs = bytearray(48)
        bhs[0] = op | (0x40 if imm else 0); bhs[1] = b1
        bhs[5:8] = struct.pack('>I', len(data))[1:]
        for off, val in fields: bhs[off:off + len(val)] = val
        p = bytes(bhs)
        if s.dig: p += struct.pack('<I', crc32c(bhs))
        pad = b'\0' * ((4 - len(data) % 4) % 4)
        p += data + pad
        if s.dig and data: p += struct.pack('<I', crc32c(data + pad))
        s.buf += p
    def keys(s, **kv): return b''.join(('%s=%s' % (k, v)).encode() + b'\0' for k, v in kv.items())
    def login(s, discovery=False, digests=False, stages=False, target='iqn.2026-12.fuzz:t', immediate='No'):
        k = dict(InitiatorName='iqn.2026-12.fuzz:i')
        if discovery: k['SessionType'] = 'Discovery'
        else: k.update(TargetName=target, SessionType='Normal')
        isid = b'\x80\0\0\0\0\x01'
        if stages:
            s.pdu(0x03, 0x80 | 0x01, [(8, isid), (16, struct.pack('>I', s.itt)), (24, struct.pack('>I', s.cmdsn))],
                  s.keys(**k, AuthMethod='None'))
            s.itt += 1
            k = {}
        dg = 'CRC32C' if digests else 'None'
        k.update(HeaderDigest=dg, DataDigest=dg, MaxRecvDataSegmentLength=65536, MaxBurstLength=262144,
                 FirstBurstLength=65536, InitialR2T='Yes', ImmediateData=immediate, ErrorRecoveryLevel=0)
        s.pdu(0x03, 0x80 | 0x04 | 0x03, [(8, isid), (16, struct.pack('>I', s.itt)), (24, struct.pack('>I', s.cmdsn))],
              s.keys(**k))
        s.itt += 1
        s.dig = digests
    def cmd(s, cdb, r=False, w=False, edtl=0, lun=0, data=b''):
        cdb = bytes(cdb) + b'\0' * (16 - len(cdb))
        fl = 0x80 | (0x40 if r else 0) | (0x20 if w else 0) | 0x01
        s.pdu(0x01, fl, [(8, bytes([0, lun])), (16, struct.pack('>I', s.itt)), (20, struct.pack('>I', edtl)),
                         (24, struct.pack('>I', s.cmdsn)), (32, cdb)], data, imm=False)
        itt = s.itt; s.itt += 1; s.cmdsn += 1
        return itt
    def dout(s, itt, ttt, data, off=0, datasn=0, lun=0, final=True):
        s.pdu(0x05, 0x80 if final else 0, [(8, bytes([0, lun])), (16, struct.pack('>I', itt)), (20, struct.pack('>I', ttt)),
                           (36, struct.pack('>I', datasn)), (40, struct.pack('>I', off))], data, imm=False)
    def nop(s, data=b'ping'):
        s.pdu(0x00, 0x80, [(16, struct.pack('>I', s.itt)), (20, b'\xff' * 4), (24, struct.pack('>I', s.cmdsn))], data)
        s.itt += 1
    def text(s, **kv):
        s.pdu(0x04, 0x80, [(16, struct.pack('>I', s.itt)), (20, b'\xff' * 4), (24, struct.pack('>I', s.cmdsn))],
              s.keys(**kv), imm=False)
        s.itt += 1; s.cmdsn += 1
    def tmf(s, fn, rtt=0xffffffff, lun=0):
        s.pdu(0x02, 0x80 | fn, [(8, bytes([0, lun])), (16, struct.pack('>I', s.itt)), (20, struct.pack('>I', rtt)),
                                (24, struct.pack('>I', s.cmdsn))])
        s.itt += 1
    def logout(s):
        s.pdu(0x06, 0x80, [(16, struct.pack('>I', s.itt)), (24, struct.pack('>I', s.cmdsn))])
        s.itt += 1
    def save(s, name): open(os.path.join(out, name), 'wb').write(s.buf)
be32 = lambda v: struct.pack('>I', v)
be16 = lambda v: struct.pack('>H', v)
be64 = lambda v: struct.pack('>Q', v)

s = S(); s.login()
s.cmd([0x12, 0, 0, 0, 96], r=True, edtl=96)                       # INQUIRY
s.cmd([0x12, 1, 0x83, 0, 255], r=True, edtl=255)                  # VPD 0x83
s.cmd([0x25], r=True, edtl=8)                                     # READ CAPACITY(10)
s.cmd([0x9e, 0x10] + [0] * 8 + list(be32(32)), r=True, edtl=32)   # READ CAPACITY(16)
s.cmd([0xa0, 0, 0, 0, 0, 0] + list(be32(256)), r=True, edtl=256)  # REPORT LUNS
s.cmd([0x28, 0] + list(be32(0)) + [0] + list(be16(8)), r=True, edtl=4096)  # READ(10)
s.cmd([0x00])                                                     # TEST UNIT READY
s.logout(); s.save('normal-read')

s = S(); s.login()
itt = s.cmd([0x2a, 0] + list(be32(2)) + [0] + list(be16(1)), w=True, edtl=512)    # WRITE(10): R2T TTT 1
s.dout(itt, 1, b'W' * 512)
itt = s.cmd([0x8a, 0x08] + list(be64(8)) + list(be32(2)), w=True, edtl=1024)    # WRITE(16) FUA: TTT 2
s.dout(itt, 2, b'x' * 512, 0, 0, final=False); s.dout(itt, 2, b'y' * 512, 512, 1)
s.cmd([0x35])                                                     # SYNCHRONIZE CACHE
itt = s.cmd([0x2f, 0x02] + list(be32(2)) + [0] + list(be16(1)), w=True, edtl=512)  # VERIFY BYTCHK=1
s.dout(itt, 3, b'W' * 512)
itt = s.cmd([0x89, 0] + list(be64(2)) + [0, 0, 0, 1], w=True, edtl=1024)      # COMPARE AND WRITE
s.dout(itt, 4, b'W' * 512 + b'Z' * 512)
itt = s.cmd([0x41, 0x08] + list(be32(16)) + [0] + list(be16(8)), w=True, edtl=512)  # WRITE SAME(10) UNMAP
s.dout(itt, 5, b'\0' * 512)
itt = s.cmd([0x42, 0, 0, 0, 0, 0, 0] + list(be16(24)), w=True, edtl=24)       # UNMAP
s.dout(itt, 6, be16(22) + be16(16) + b'\0' * 4 + be64(100) + be32(8) + b'\0' * 4)
s.logout(); s.save('normal-write')

s = S(); s.login(discovery=True)
s.text(SendTargets='All'); s.nop(b'hello'); s.text(SendTargets='iqn.2026-12.fuzz:t'); s.logout()
s.save('discovery')

s = S(); s.login(stages=True, digests=True)
s.cmd([0x12, 0, 0, 0, 36], r=True, edtl=36); s.nop(b'x' * 100)
s.cmd([0x28, 0] + list(be32(0)) + [0] + list(be16(1)), r=True, edtl=4096, lun=1)   # READ on the 4K LUN
s.logout(); s.save('stages-digests')

s = S(); s.login()
itt = s.cmd([0x2a, 0] + list(be32(0)) + [0] + list(be16(64)), w=True, edtl=32768)   # R2T outstanding
s.tmf(1, rtt=itt)                                                 # ABORT TASK (answered after the data)
s.dout(itt, 1, b'a' * 32768)
s.cmd([0x5f, 0x00, 0, 0, 0, 0, 0] + list(be16(24)), w=True, edtl=24)   # PR OUT REGISTER
s.dout(s.itt - 1, 2, b'\0' * 8 + be64(0x1234) + b'\0' * 8)
s.cmd([0x5e, 0, 0, 0, 0, 0, 0] + list(be16(256)), r=True, edtl=256)    # PR IN READ KEYS
s.cmd([0x16]); s.cmd([0x17])                                      # RESERVE / RELEASE(6)
s.tmf(5); s.tmf(2); s.tmf(6)                                      # LU reset, abort task set, warm reset
s.logout(); s.save('tmf-pr')

s = S(); s.login()                                                # #11.1: data-out missing or short
s.cmd([0x2f, 0x02] + list(be32(0)) + [0] + list(be16(8)))          # VERIFY(10) BYTCHK=1, no data-out
itt = s.cmd([0x8f, 0x02] + list(be64(0)) + list(be32(8)), w=True, edtl=512)   # VERIFY(16), EDTL 512 of 4096
s.dout(itt, 1, b'\0' * 512)
s.cmd([0x41, 0] + list(be32(0)) + [0] + list(be16(8)))             # WRITE SAME(10), no data-out
s.logout(); s.save('verify-short')

s = S(); s.login(target='iqn.2026-12.fuzz:imm', immediate='Yes')  # immediate data
s.cmd([0x2a, 0] + list(be32(2)) + [0] + list(be16(1)), w=True, edtl=512, data=b'I' * 512)   # all of it
itt = s.cmd([0x2a, 0] + list(be32(4)) + [0] + list(be16(4)), w=True, edtl=2048, data=b'J' * 512)   # then R2T
s.dout(itt, 1, b'K' * 1536, off=512)
s.cmd([0x28, 0] + list(be32(2)) + [0] + list(be16(6)), r=True, edtl=3072)
s.cmd([0x2a, 0] + list(be32(9)) + [0] + list(be16(1)), w=True, edtl=512, data=b'L' * 1024)  # more than EDTL
s.logout(); s.save('immediate-data')

s = S()                                                           # continuation login
isid = b'\x80\0\0\0\0\x02'
k = s.keys(InitiatorName='iqn.2026-12.fuzz:i', TargetName='iqn.2026-12.fuzz:t')
s.pdu(0x03, 0x40 | 0x04, [(8, isid), (16, be32(1))], k[:20])
s.pdu(0x03, 0x80 | 0x04 | 0x03, [(8, isid), (16, be32(1))], k[20:])
s.save('login-continuation')
PY
