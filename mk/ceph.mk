# Ceph pools (storage/ceph): built with librbd/librados when their headers are installed
# (`make deps` installs $(CEPH_PKGS)); `make bench-ceph` compares nasd and tgt on RBD.
# Checked when a recipe runs (not when make starts), so a `make test` that installs the
# packages first builds with them.
CEPH_PKGS := ceph-mon ceph-mgr ceph-osd ceph-common librados-dev librbd-dev tgt-rbd
CEPH_ON = $(shell test -f /usr/include/rbd/librbd.h && echo 1)
override CFLAGS += $(if $(CEPH_ON),-DNASD_CEPH)
LDLIBS += $(if $(CEPH_ON),-lrbd -lrados)

.PHONY: bench-ceph
BENCHES += bench-ceph
bench-ceph: $(B)/tools/iscsi_pattern $(B)/bench/iscsi_wbench $(B)/nasd
	@scripts/deps.sh $(CEPH_PKGS)
	@mk/ceph_bench.sh $(B) $(or $(BENCH_SECS),10)
