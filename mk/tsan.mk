# ThreadSanitizer run of the unit tests whose subject runs on several threads (pool
# engine, dataset filesystem, txblock): `make tsan`. Not part of `make test` (a TSan
# build of everything takes minutes on 2 cores); run it after changing locking.
# detect_deadlocks=0: a commit holds more row locks at once than TSan's detector tracks (64).
BT ?= build-tsan
TSAN_TESTS := test_vpool test_vpool_mt test_vpool_crash test_vpool_snap test_vpool_cow test_vpool_fault \
              test_vfs_ext2_mt test_txblock
.PHONY: tsan
tsan: deps
	@$(MAKE) --no-print-directory B=$(BT) CFLAGS="-O1 -g -fsanitize=thread" $(TSAN_TESTS:%=$(BT)/tests/%)
	@TSAN_OPTIONS="halt_on_error=1 detect_deadlocks=0" UNIT_ONLY=1 scripts/run-tests.sh $(TSAN_TESTS:%=$(BT)/tests/%)
