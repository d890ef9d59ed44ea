#!/bin/sh
# Seed corpus for the recv harness: small send streams (byte 0 = 1: the harness fixes
# the checksums; 3: and sends it as an increment on top of its base snapshot).
d=$1
u32() { printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)))"; }
u64() { u32 $(($1 & 4294967295)); u32 $(($1 >> 32)); }
name64() { printf '%s' "$1"; head -c $((64 - ${#1})) /dev/zero; }
hdr() {   # hdr SIZE SNAP FROM
  u64 3550048525810355777; u32 1; u32 0; u64 $1; u64 1764720000
  name64 "$2"; name64 "$3"; head -c 32 /dev/zero; u64 0
}
rec() { u32 1414090325; u32 $1; u64 $2; u32 $3; u32 0; u64 0; [ "$3" -gt 0 ] && head -c $3 /dev/urandom; true; }
end() { u32 558124613; u32 0; u64 0; u64 0; u64 0; }
{ printf '\001'; hdr 8192 s ''; rec 1 0 8192; end; } > "$d/full"
{ printf '\001'; hdr 12288 t ''; rec 1 0 12288; end; } > "$d/full_partial"
{ printf '\003'; hdr 2097152 s2 base; rec 2 1 0; end; } > "$d/incr_zero"
{ printf '\001'; hdr 8192 s ''; rec 1 5 8192; end; } > "$d/unit_out_of_range"
{ printf '\000'; hdr 8192 s ''; rec 1 0 8192; end; } > "$d/bad_checksums"
