# Ceph pools (storage/ceph): built with librbd/librados when their headers are installed
# (scripts/deps.sh $(CEPH_PKGS)); `make bench-ceph` compares nasd and tgt on RBD.
CEPH_PKGS := ceph-mon ceph-mgr ceph-osd ceph-common librados-dev librbd-dev tgt-rbd
ifneq ($(wildcard /usr/include/rbd/librbd.h),)
override CFLAGS += -DNASD_CEPH
LDLIBS += -lrbd -lrados
endif

.PHONY: bench-ceph
BENCHES += bench-ceph
bench-ceph: $(B)/tools/iscsi_pattern $(B)/bench/iscsi_wbench $(B)/nasd
	@scripts/deps.sh $(CEPH_PKGS)
	@mk/ceph_bench.sh $(B) $(or $(BENCH_SECS),10)
