
# bench-iscsi: iscsi-perf (4K random read QD32, 512 B sequential read QD32) against
# the built-in target and tgtd on the same 1 GiB file; prints IOPS and the ratio.
.PHONY: bench-iscsi
BENCHES += bench-iscsi
bench-iscsi: $(B)/tools/iscsi_serve
	@mk/iscsi_bench.sh $(B) $(or $(BENCH_SECS),10)
