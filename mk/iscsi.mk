
# bench-iscsi: reads (iscsi-perf) and writes (bench/iscsi_wbench) against nasd on a plain file,
# the nasd daemon on a raidz1 pool volume and tgtd on the same 1 GiB file; prints figures and ratios.
.PHONY: bench-iscsi
BENCHES += bench-iscsi
bench-iscsi: $(B)/tools/iscsi_serve $(B)/tools/iscsi_pattern $(B)/bench/iscsi_wbench $(B)/nasd
	@mk/iscsi_bench.sh $(B) $(or $(BENCH_SECS),10)

# The iSCSI test tools linked against the clang ASan+UBSan libnasd of mk/fuzz.mk, so the
# hostile-traffic tests (33_-36_) see use-after-free and over-reads, not just crashes.
$(FB)/tools/%: tests/tools/%.c fuzz-lib
	@mkdir -p $(dir $@)
	clang -O1 -g $(FUZZ_SAN) -std=gnu11 -I. -pthread $(shell pkg-config --cflags $(PKGS) 2>/dev/null) \
	  -o $@ $< $(FB)/libnasd.a $(LDLIBS)
