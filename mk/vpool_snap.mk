# make bench-vpool-snap: write throughput with 0, 1 and 32 snapshots, create/delete times
.PHONY: bench-vpool-snap
BENCHES += bench-vpool-snap
bench-vpool-snap: $(B)/bench/vpool_snap_bench
	$(B)/bench/vpool_snap_bench $(VPOOL_SNAP_BENCH_ARGS)
