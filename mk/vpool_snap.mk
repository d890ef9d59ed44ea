# make bench-vpool-snap: write throughput with 0, 1 and 32 snapshots, create/delete times
# (vpool_bench -C). VPOOL_SNAP_BENCH_ARGS e.g. "-s 512 -w 512 -t 3 -j 4".
.PHONY: bench-vpool-snap
BENCHES += bench-vpool-snap
bench-vpool-snap: $(B)/bench/vpool_bench
	$(B)/bench/vpool_bench -C $(VPOOL_SNAP_BENCH_ARGS)
