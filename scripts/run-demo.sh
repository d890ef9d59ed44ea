#!/bin/sh
# `make run`: the demo appliance on file-backed disks under ./var, UI on http://127.0.0.1:8080.
# Ports 3260/2049/20048/111 need root; as a normal user the protocol services use high ports.
cd "$(dirname "$0")/.." || exit 1
mkdir -p var
if [ "$(id -u)" = 0 ]; then
  set -- --iscsi-portal 0.0.0.0:3260 --nfs-port 2049 --mount-port 20048 --portmap-port 111
  if pgrep -x rpcbind >/dev/null 2>&1; then set -- --iscsi-portal 0.0.0.0:3260 --nfs-port 2049 --mount-port 20048 --portmap-port -1; fi
else
  echo "run: not root; iSCSI on 3261, NFS on 12049/12048 with portmapper on 10111"
  set -- --iscsi-portal 0.0.0.0:3261 --nfs-port 12049 --mount-port 12048 --portmap-port 10111
fi
echo "run: nasd UI and REST API on http://127.0.0.1:8080/  (Ctrl-C stops it)"
exec build/nasd --config etc/nasd.conf --demo "$@"
