#!/bin/sh
# Seed corpus for the xdr harness: the first byte picks the target (0 decoders,
# 1 encoders, 2 RPC call header, 3 record marking, 4 file handle, 5 MOUNT path).
d=$1
printf '\0\0\0\0\0\0\0\0\1\0\0\0\2' > "$d/u64"
printf '\0\0\0\0\2\0\0\0\5hello\0\0\0' > "$d/opaque"
printf '\0\0\0\0\3\0\0\0\3abc\0' > "$d/string"
printf '\001\100\0\0\5\3\20\2\4\4\7' > "$d/encode"
printf '\002\0\0\0\1\0\0\0\0\0\0\0\2\0\1\206\243\0\0\0\3\0\0\0\1\0\0\0\1\0\0\0\30\0\0\0\0\0\0\0\1h\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0' > "$d/rpc_call"
printf '\003\0\0\0\4abcd\200\0\0\4efgh' > "$d/records"
printf '\004NX\002\010\0\0\0\1\0\0\0\1\0\0\0\1abcdefgh01234567' > "$d/handle"
printf '\005/tank//share/./x/' > "$d/mount_path"
