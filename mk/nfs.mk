# NFS benchmark: our service vs nfs-ganesha, same libnfs workload (bench/nfs_bench.sh).
.PHONY: bench-nfs
BENCHES += bench-nfs
bench-nfs: $(B)/bench/nfs_bench $(B)/bench/cpu_probe $(B)/tools/nfs_serve
	@scripts/deps.sh nfs-ganesha nfs-ganesha-vfs rpcbind
	B=$(B) bench/nfs_bench.sh $(NFS_BENCH_ARGS)
