# Pool engine benchmark: raidz1 of 4 member files vs the same files striped raw.
# VPOOL_BENCH_ARGS e.g. "-d /var/tmp -s 1024 -t 5 -j 8 -w 2048".
.PHONY: bench-vpool
BENCHES += bench-vpool
# The CPU probe before and after (bench/cpu_probe.c): how fast each vCPU ran meanwhile.
bench-vpool: $(B)/bench/vpool_bench $(B)/bench/cpu_probe
	@echo "cpu probe before (ms):" $$($(B)/bench/cpu_probe)
	$(B)/bench/vpool_bench $(VPOOL_BENCH_ARGS)
	@echo "cpu probe after (ms):" $$($(B)/bench/cpu_probe)

# What the raidz1 random-write path could reach (bench/row_ceiling.c): raw vs the
# system calls of an in-place write vs full-stripe log segments, without and with a
# cleaner at several fullnesses of the log space (ROW_CEILING_ARGS="-u 0.7,0.8"), one run.
.PHONY: bench-row-ceiling
BENCHES += bench-row-ceiling
bench-row-ceiling: $(B)/bench/row_ceiling
	$(B)/bench/row_ceiling $(ROW_CEILING_ARGS)
