#!/bin/sh
# Seed corpus for the import harness: byte 0 = flags (1: fix checksums, 2: member 0
# missing), then patches {member u8, offset u32 LE, length u8, bytes}; the offset's top 2
# bits pick the area: 0 labels and owner sector, 1 journal, 2 metadata copy A, 3 anywhere.
d=$1
u32() { printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)))"; }
patch() { printf "$(printf '\\%03o' "$1")"; u32 "$2"; printf "$(printf '\\%03o' "$3")"; }   # member offset length
printf '\000' > "$d/intact"
printf '\002' > "$d/member0_missing"
{ printf '\001'; patch 0 100 4; u32 9; } > "$d/label_nmembers"                 # label A: nmembers
{ printf '\001'; patch 1 408 8; u32 4294967295; u32 4294967295; } > "$d/label_jnl_size"
{ printf '\001'; patch 0 $((1 << 30 | 64)) 8; u32 4294967295; u32 16; } > "$d/record_sector"   # batch 0, record 0: a (sector)
{ printf '\001'; patch 2 $((1 << 30 | 32)) 4; u32 65535; } > "$d/batch_nrec"               # journal batch 0: nrec
{ printf '\001'; patch 0 $((1 << 30 | 56)) 4; u32 4; } > "$d/record_type"                   # record 0 becomes ALLOC
{ printf '\003'; patch 1 $((1 << 30 | 60)) 4; u32 248; } > "$d/record_vol"                  # record 0: a32, member 0 gone
{ printf '\000'; patch 0 $((2 << 30)) 16; u32 1; u32 2; u32 3; u32 4; } > "$d/meta_page_torn"
