
# bench-iscsi: reads (iscsi-perf) and writes (bench/iscsi_wbench) against nasd on a plain file,
# the nasd daemon on a raidz1 pool volume and tgtd on the same 1 GiB file; prints figures and ratios.
.PHONY: bench-iscsi
BENCHES += bench-iscsi
bench-iscsi: $(B)/tools/iscsi_serve $(B)/tools/iscsi_pattern $(B)/bench/iscsi_wbench $(B)/nasd $(B)/bench/cpu_probe
	@scripts/deps.sh tgt
	@echo "cpu probe before (ms):" $$($(B)/bench/cpu_probe)
	@mk/iscsi_bench.sh $(B) $(or $(BENCH_SECS),10)
	@echo "cpu probe after (ms):" $$($(B)/bench/cpu_probe)

