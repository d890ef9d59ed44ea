# ASan+UBSan build of the daemon and the hostile-input test programs in $(BA), used by
# the malformed-input integration tests (31, 41, 37) when present, so that a memory
# error there aborts the server and fails the test instead of passing silently.
# `make test` builds it first; `make asan` alone builds it.
BA       ?= build-asan
ASAN_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
ASAN_BINS := nasd tools/nfs_serve tools/nfs_malformed tools/nfs_rpc_check tools/iscsi_serve tools/iscsi_malformed
# unit tests whose races only a sanitizer sees (a use after free that does not crash):
# `make test` runs them from $(BA) too
ASAN_UNITS := tests/test_storage_pool_refs
ASAN_BINS += $(ASAN_UNITS)
.PHONY: asan
asan:
	@$(MAKE) --no-print-directory B=$(BA) CFLAGS="-O1 -g $(ASAN_SAN)" $(ASAN_BINS:%=$(BA)/%)
test: asan
