#!/bin/sh
# Seed corpus for the iscsi_pdu harness: first byte selects BHS / key list / negotiation / value.
d=$1
printf '\000\003\207\000\000\000\000\000\000\200\000\000\000\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' > "$d/bhs-login"
printf '\001InitiatorName=iqn.2026-12.test:i\000TargetName=iqn.2026-12.test:t\000SessionType=Normal\000' > "$d/keys-login"
printf '\001CHAP_A=5\000CHAP_I=12\000CHAP_C=0x0123456789abcdef0123456789abcdef\000CHAP_R=0bASNFZ4mrze8=\000' > "$d/keys-chap"
printf '\002HeaderDigest=CRC32C,None\000DataDigest=None\000MaxRecvDataSegmentLength=262144\000MaxBurstLength=1048576\000FirstBurstLength=65536\000InitialR2T=No\000ImmediateData=Yes\000MaxOutstandingR2T=4\000DefaultTime2Wait=2\000ErrorRecoveryLevel=0\000X-Vendor=1\000' > "$d/neg"
printf '\0030x1234' > "$d/num-hex"
printf '\0030b3q2+7w==' > "$d/b64"
