# ThreadSanitizer runs of the unit tests whose subject runs on several threads (pool
# engine, dataset filesystem, txblock): `make tsan`; ASan+UBSan: `make unit-asan`. Not part
# of `make test` (each build takes minutes on 2 cores); run them after changing locking or I/O.
# detect_deadlocks=0: a commit holds more row locks at once than TSan's detector tracks (64).
# Under TSan test_vpool_snap alone takes 334 s, the five slowest 19 min three at a time: 30 min
# a program, and Check's own test timeouts 10 times as long.
SAN_TIMEOUTS := UNIT_TIMEOUT=1800 CK_TIMEOUT_MULTIPLIER=10
BT ?= build-tsan
TSAN_TESTS := test_vpool test_vpool_mt test_vpool_crash test_vpool_snap test_vpool_snap_page test_vpool_vol_page test_vpool_meta test_vpool_cow test_vpool_fault \
              test_vpool_log test_vpool_log_crash test_vpool_log_cow test_vpool_writeback test_vfs_ext2_mt test_txblock
.PHONY: tsan
tsan: deps
	@$(MAKE) --no-print-directory B=$(BT) CFLAGS="-O1 -g -fsanitize=thread" $(TSAN_TESTS:%=$(BT)/tests/%)
	@TSAN_OPTIONS="halt_on_error=1 detect_deadlocks=0" $(SAN_TIMEOUTS) UNIT_ONLY=1 scripts/run-tests.sh $(TSAN_TESTS:%=$(BT)/tests/%)

# The same tests under ASan+UBSan (`make unit-asan`, not in `make test` either): its first run
# (2026-12-04, test_vpool_crash looped) found a misaligned 64-bit load in degraded reads.
BU ?= build-unit-asan
.PHONY: unit-asan
unit-asan: deps
	@$(MAKE) --no-print-directory B=$(BU) CFLAGS="-O1 -g $(ASAN_SAN)" $(TSAN_TESTS:%=$(BU)/tests/%)
	@UBSAN_OPTIONS=print_stacktrace=1 $(SAN_TIMEOUTS) UNIT_ONLY=1 scripts/run-tests.sh $(TSAN_TESTS:%=$(BU)/tests/%)
