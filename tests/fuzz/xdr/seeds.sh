#!/bin/sh
# Seed corpus for the xdr harness: a few well-formed records (op, value) pairs.
d=$1
printf '\0\0\0\0\0\0\0\1\0\0\0\2' > "$d/u64"
printf '\0\0\0\2\0\0\0\5hello\0\0\0' > "$d/opaque"
printf '\0\0\0\3\0\0\0\3abc\0' > "$d/string"
