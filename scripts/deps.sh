#!/bin/sh
# Installs the Debian packages nasd needs when run as root; otherwise prints the apt-get line.
# Extra packages (e.g. for benchmarks) can be passed as arguments.
# Without arguments this is everything `make test` needs, the browser test's chromium and node included.
PKGS="gcc make pkg-config curl libmicrohttpd-dev libjansson-dev libsqlite3-dev libiscsi-dev libiscsi-bin
      libnfs-dev libnfs-utils check jq libisal-dev libxxhash-dev liblz4-dev nettle-dev libext2fs-dev e2fsprogs clang python3
      libblkid-dev $*"
[ $# -eq 0 ] && PKGS="$PKGS chromium"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
# node may come from outside Debian (e.g. nodesource, which bundles npm): check the commands.
if [ $# -eq 0 ] && ! { command -v node && command -v npm; } >/dev/null 2>&1; then missing="$missing nodejs npm"; fi
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
  echo "deps: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq $missing >/dev/null || { echo "deps: apt-get failed" >&2; exit 1; }
else
  echo "deps: missing packages. Run:" >&2
  echo "  sudo apt-get install -y$missing" >&2
  exit 1
fi
