# make bench-vpool-snap: write throughput with 0, 1 and 32 snapshots, create/delete times
# (vpool_bench -C): raidz1-inplace and raidz1 (log) in the page cache, raidz1 on O_DIRECT members.
# VPOOL_SNAP_BENCH_ARGS e.g. "-s 2048 -w 512 -t 3 -j 4", "-L 2 -D 1" (only the O_DIRECT set).
.PHONY: bench-vpool-snap
BENCHES += bench-vpool-snap
bench-vpool-snap: $(B)/bench/vpool_bench
	$(B)/bench/vpool_bench -C $(VPOOL_SNAP_BENCH_ARGS)
