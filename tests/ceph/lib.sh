# Helpers for the ceph integration tests (source after tests/integration/lib.sh).
# ceph_up DIR: installs the ceph packages when missing (skipping the test, exit 0, only
# when they cannot be installed), starts tests/ceph/cluster.sh in DIR/ceph and sets
# CEPH_DIR, CEPH_MON, CEPH_KEY, CEPH_CONF; the caller's EXIT trap must call ceph_down.
CEPH_PKGS="ceph-mon ceph-mgr ceph-osd ceph-common librados-dev librbd-dev"
ceph_up() {
  if ! "$ROOT/scripts/deps.sh" $CEPH_PKGS >/dev/null 2>&1; then
    echo "SKIP: ceph packages ($CEPH_PKGS) are not installed and cannot be installed here"
    exit 0
  fi
  ldd "$NASD" | grep -q librbd || fail "$NASD was built without ceph support (librbd-dev was missing then): run make again"
  CEPH_DIR=$1/ceph
  "$ROOT/tests/ceph/cluster.sh" start "$CEPH_DIR" || fail "ceph cluster did not start"
  eval "$("$ROOT/tests/ceph/cluster.sh" env "$CEPH_DIR")"
}
ceph_down() { [ -n "${CEPH_DIR:-}" ] && "$ROOT/tests/ceph/cluster.sh" stop "$CEPH_DIR"; }
# ceph_pool_json NAME [RADOS_POOL]: the POST /pools body for a ceph pool on this cluster
ceph_pool_json() {
  printf '{"name":"%s","backend":"ceph","ceph":{"monitors":"%s","pool":"%s","user":"admin","key":"%s"}}' \
    "$1" "$CEPH_MON" "${2:-rbd}" "$CEPH_KEY"
}
# ceph_import_json [RADOS_POOL]: the POST /pools/{name}/import body
ceph_import_json() {
  printf '{"backend":"ceph","ceph":{"monitors":"%s","pool":"%s","user":"admin","key":"%s"}}' \
    "$CEPH_MON" "${1:-rbd}" "$CEPH_KEY"
}
