#!/bin/bash
# #10.2: POST /pools and member replace never overwrite existing content without "force":
# an ext4 image is refused (409, found[] names ext4, force_required) and taken with force;
# a member of an exported nasd pool is refused with a hint to import it; a file with random
# data somewhere in it is refused; a fresh sparse file and the members of a pool destroyed by
# nasd are accepted without force; replace with an ext4 image is refused, forced works.
# A forced create or replace that is refused for another reason leaves the disk as it was;
# a mounted block device is refused even with force, and a pool's block device cannot be
# mounted while the pool is open (root and loop devices only).
set -u
. "$(dirname "$0")/lib.sh"
command -v mkfs.ext4 >/dev/null || fail "mkfs.ext4 missing (e2fsprogs)"
TMP=$(mktemp -d /tmp/nasd-existing-XXXXXX)
LOOP=""
cleanup() {
    stop_nasd
    if [ -n "$LOOP" ]; then umount "$TMP/mnt" 2>/dev/null; losetup -d "$LOOP" 2>/dev/null; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
mkdir -p "$TMP/state" "$TMP/exp"
start_nasd "$TMP/state"

truncate -s 128M "$TMP/ext4.img" && mkfs.ext4 -q -F -L precious "$TMP/ext4.img" || fail "mkfs.ext4"
api POST pools "{\"name\":\"p1\",\"members\":[\"$TMP/ext4.img\"]}" >/dev/null; body=$BODY
[ "$STATUS" = 409 ] || fail "ext4 image: $STATUS (want 409): $body"
[ "$(jget "$body" .force_required)" = true ] || fail "ext4: force_required missing: $body"
jget "$body" '.found[0].what' | grep -q ext4 || fail "ext4: finding does not name ext4: $body"
[ "$(jget "$body" '.found[0].path')" = "$TMP/ext4.img" ] || fail "ext4: finding path: $body"
jget "$body" '.error.message' | grep -q 'ext4' || fail "ext4: message does not say what was found: $body"
echo "ext4 image refused: $(jget "$body" .error.message)"
blkid -p "$TMP/ext4.img" 2>/dev/null | grep -q ext4 || fail "the refused create touched the ext4 image"
expect 201 POST pools "{\"name\":\"p1\",\"members\":[\"$TMP/ext4.img\"],\"force\":true}"
blkid -p "$TMP/ext4.img" 2>/dev/null | grep -q ext4 && fail "forced: ext4 signature still there"
echo "forced create on the ext4 image works"

truncate -s 128M "$TMP/fresh.img"
expect 201 POST pools "{\"name\":\"p2\",\"members\":[\"$TMP/fresh.img\"]}"
echo "fresh sparse file accepted without force"
expect 204 DELETE pools/p2
expect 201 POST pools "{\"name\":\"p2\",\"members\":[\"$TMP/fresh.img\"]}"
echo "members of a pool destroyed by nasd are reused without force"

# a partitioned disk (GPT, one partition, no filesystem in it)
truncate -s 128M "$TMP/gpt.img"
if command -v sfdisk >/dev/null; then
  printf 'label: gpt\n,64M\n' | sfdisk -q "$TMP/gpt.img" >/dev/null 2>&1 || fail "sfdisk"
  api POST pools "{\"name\":\"pg\",\"members\":[\"$TMP/gpt.img\"]}" >/dev/null; body=$BODY
  [ "$STATUS" = 409 ] && jget "$body" '.found[].what' | grep -q 'gpt partition table' || fail "GPT disk: $STATUS $body"
  echo "partitioned disk refused: $(jget "$body" '.found[0].what')"
  expect 201 POST pools "{\"name\":\"pg\",\"members\":[\"$TMP/gpt.img\"],\"force\":true}"
  blkid -p "$TMP/gpt.img" 2>/dev/null | grep -q gpt && fail "forced: GPT (or its backup header) still found"
else
  echo "note: sfdisk missing, partition-table case skipped"
fi

truncate -s 128M "$TMP/data.img"
head -c 65536 /dev/urandom | dd of="$TMP/data.img" bs=64k seek=700 conv=notrunc status=none
api POST pools "{\"name\":\"p3\",\"members\":[\"$TMP/data.img\"]}" >/dev/null; body=$BODY
[ "$STATUS" = 409 ] && [ "$(jget "$body" '.found[0].kind')" = data ] || fail "random data: $STATUS $body"
echo "non-zero data refused: $(jget "$body" '.found[0].what')"

"$ROOT/build/tools/vpool_tool" create "$TMP/exp" mirror 2 64 8 >/dev/null || fail "vpool_tool create"
api POST pools "{\"name\":\"p4\",\"layout\":\"mirror\",\"members\":[\"$TMP/exp/m0\",\"$TMP/exp/m1\"]}" >/dev/null; body=$BODY
[ "$STATUS" = 409 ] || fail "exported pool member: $STATUS $body"
[ "$(jget "$body" '.found[0].import')" = crash ] || fail "no import suggestion: $body"
jget "$body" '.error.message' | grep -q 'import' || fail "message does not suggest import: $body"
echo "exported pool member refused: $(jget "$body" '.found[0].what')"
expect 201 POST pools/crash/import "{\"members\":[\"$TMP/exp/m0\",\"$TMP/exp/m1\"]}"
echo "... and importing it works"
# the hint names the layout as the API does, from the member's label
for lay in raidz1 raidz1-inplace; do
    mkdir -p "$TMP/$lay"
    "$ROOT/build/tools/vpool_tool" create "$TMP/$lay" "$lay" 3 64 8 >/dev/null || fail "vpool_tool create $lay"
    api POST pools "{\"name\":\"p5\",\"members\":[\"$TMP/$lay/m0\"]}" >/dev/null; body=$BODY
    [ "$STATUS" = 409 ] && jget "$body" '.found[0].what' | grep -qF "($lay)" || fail "$lay member: $STATUS $body"
done
echo "the hint names raidz1 and raidz1-inplace"

# replace: a mirror, then an ext4 image as the new member
truncate -s 128M "$TMP/r0" "$TMP/r1"
expect 201 POST pools "{\"name\":\"pm\",\"layout\":\"mirror\",\"members\":[\"$TMP/r0\",\"$TMP/r1\"]}"
truncate -s 128M "$TMP/ext4b.img" && mkfs.ext4 -q -F "$TMP/ext4b.img" || fail "mkfs.ext4"
api POST pools/pm/replace "{\"member\":1,\"path\":\"$TMP/ext4b.img\"}" >/dev/null; body=$BODY
[ "$STATUS" = 409 ] && [ "$(jget "$body" .force_required)" = true ] || fail "replace onto ext4: $STATUS $body"
expect 200 POST pools/pm/replace "{\"member\":1,\"path\":\"$TMP/ext4b.img\",\"force\":true}"
echo "replace onto an ext4 image refused, forced works"
expect 400 POST pools "{\"name\":\"p5\",\"members\":[\"$TMP/fresh.img\"],\"force\":\"yes\"}"
# a FIFO as a member: opening it for reading waited for a writer, and held the REST server
mkfifo "$TMP/fifo"
for req in "pools {\"name\":\"pf\",\"layout\":\"stripe\",\"members\":[\"$TMP/fifo\"]}" \
           "pools/pf/import {\"members\":[\"$TMP/fifo\"]}"; do
    out=$(timeout 20 curl -s -w '\n%{http_code}' -X POST -H 'Content-Type: application/json' --data "${req#* }" "$API/${req%% *}")
    case ${out##*$'\n'} in 4??) ;; *) fail "POST ${req%% *} with a FIFO member: '${out##*$'\n'}' ${out%$'\n'*}";; esac
done
expect 200 GET system
echo "a FIFO as a member refused at once"
# a copy of an open pool's disks carries its volume identities (iSCSI serials): refused
cp --sparse=always "$TMP/r0" "$TMP/r0copy" && cp --sparse=always "$TMP/ext4b.img" "$TMP/r1copy" || fail "copying pm"
api POST pools/pmcopy/import "{\"members\":[\"$TMP/r0copy\",\"$TMP/r1copy\"]}" >/dev/null
case $STATUS in 4??) echo "$BODY" | grep -q "open here" ;; *) false ;; esac || fail "import of a copy of open pool pm: $STATUS $BODY"
rm -f "$TMP/r0copy" "$TMP/r1copy"
echo "a copy of an open pool's disks is not imported beside it"

# force erases only once nothing else refuses: a refused request leaves the disk as it was
truncate -s 128M "$TMP/held.img" && mkfs.ext4 -q -F "$TMP/held.img" || fail "mkfs.ext4"
sleep 30 < "$TMP/held.img" & HOLDER=$!
api POST pools "{\"name\":\"ph\",\"members\":[\"$TMP/held.img\"],\"force\":true}" >/dev/null; body=$BODY
kill $HOLDER 2>/dev/null; wait $HOLDER 2>/dev/null
[ "$STATUS" = 409 ] && jget "$body" .error.message | grep -q "open in process" || fail "forced create on an open file: $STATUS $body"
blkid -p "$TMP/held.img" 2>/dev/null | grep -q ext4 || fail "a refused forced create wiped the disk"
api POST pools/pm/replace "{\"member\":9,\"path\":\"$TMP/held.img\",\"force\":true}" >/dev/null
[ "$STATUS" = 400 ] || fail "replace of member 9: $STATUS $BODY"
truncate -s 32M "$TMP/small.img" && mkfs.ext4 -q -F "$TMP/small.img" && truncate -s 100M "$TMP/small.img" || fail "small image"
api POST pools/pm/replace "{\"member\":1,\"path\":\"$TMP/small.img\",\"force\":true}" >/dev/null
[ "$STATUS" != 200 ] || fail "replace with a member smaller than the pool's: 200"
blkid -p "$TMP/held.img" 2>/dev/null | grep -q ext4 || fail "a refused forced replace wiped the disk"
blkid -p "$TMP/small.img" 2>/dev/null | grep -q ext4 || fail "a forced replace refused for size wiped the disk"
echo "refused forced create / replace leave the disks as they were"

# block devices the system holds
if [ "$(id -u)" = 0 ] && command -v losetup >/dev/null && LOOP=$(losetup -f --show "$TMP/held.img" 2>/dev/null); then
    mkdir -p "$TMP/mnt"
    if mount "$LOOP" "$TMP/mnt" 2>/dev/null; then
        api POST pools "{\"name\":\"pl\",\"members\":[\"$LOOP\"],\"force\":true}" >/dev/null; body=$BODY
        [ "$STATUS" = 409 ] && jget "$body" '.found[0].what' | grep -q "held by the system" || fail "mounted $LOOP: $STATUS $body"
        blkid -p "$LOOP" 2>/dev/null | grep -q ext4 || fail "a mounted device was wiped"
        umount "$TMP/mnt" || fail "umount"
        echo "a mounted block device is refused even with force"
        expect 201 POST pools "{\"name\":\"pl\",\"members\":[\"$LOOP\"],\"force\":true}"
        mount "$LOOP" "$TMP/mnt" 2>/dev/null && fail "the pool's block device could be mounted while the pool is open"
        expect 204 DELETE pools/pl
        echo "an open pool's block device cannot be mounted"
    else
        echo "note: mount of a loop device not allowed here, mounted-device case skipped"
    fi
else
    echo "note: not root or no loop device, block device cases skipped"
fi
echo "PASS: existing data is never overwritten without force"
