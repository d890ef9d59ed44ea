# nasd — see README.md. `make run` and `make test` are the two entry points.
CC      ?= gcc
PKGS    := libmicrohttpd jansson sqlite3 libiscsi libnfs blkid
B       := build
CFLAGS  ?= -O2 -g
override CFLAGS += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-format-truncation \
           -pthread -I. -MMD -MP $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# gcc expands a copy of a known large size (the pool cache's 4 KiB sectors) into `rep movsq`:
# 8.7 GB/s into scattered sector buffers here, glibc's memcpy 12.8. Above 256 bytes, call it
# (x86 gcc only; other compilers keep their own choice). bench-vpool: writes into the cache
# 25-50% more per second (see the commit).
STRINGOPS := -mmemcpy-strategy=unrolled_loop:256:noalign,libcall:-1:noalign \
             -mmemset-strategy=unrolled_loop:256:noalign,libcall:-1:noalign
override CFLAGS += $(shell $(CC) $(STRINGOPS) -E -x c /dev/null >/dev/null 2>&1 && echo '$(STRINGOPS)')
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lisal -lxxhash -llz4 -lnettle -lext2fs -lcom_err -lm -pthread
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)
ifneq ($(filter all,$(or $(MAKECMDGOALS),all)),)
ifneq ($(shell pkg-config --exists $(PKGS) check 2>/dev/null && echo ok),ok)
$(warning pkg-config does not know all of: $(PKGS) check. Run scripts/deps.sh first (make run/test/bench do).)
endif
endif

# Every .c under these folders goes into libnasd.a; nasd/main.c is the daemon entry.
# COMPONENTS can be narrowed while one part is developed alone (with its own B=build-x).
COMPONENTS ?= util nasd api storage db iscsi nfs selftest
EXCLUDE ?=
# A component's subsystems (storage/pool, storage/fs, ...) are its subfolders.
LIB_SRCS := $(filter-out nasd/main.c $(EXCLUDE),$(wildcard $(addsuffix /*.c,$(COMPONENTS)) $(addsuffix /*/*.c,$(COMPONENTS))))
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/obj/%.o)
UNIT_BINS := $(patsubst tests/unit/%.c,$(B)/tests/%,$(wildcard tests/unit/test_*.c))
TOOL_BINS := $(patsubst tests/tools/%.c,$(B)/tools/%,$(wildcard tests/tools/*.c))
BENCH_BINS := $(patsubst bench/%.c,$(B)/bench/%,$(wildcard bench/*.c))

.PHONY: all deps build run test unit integration bench clean
all: $(B)/nasd $(TOOL_BINS) $(BENCH_BINS)

# pkg-config above runs when make parses this file, so on a fresh machine (no -dev packages yet)
# PKGS/CHECK_LIBS come out empty. The entry points therefore install the packages first and build
# in a second make, which parses the Makefile again with the packages present.
DEPS ?= scripts/deps.sh
deps:
	@$(DEPS)
	@$(DEPS) $(CEPH_PKGS) || echo "deps: no ceph packages: ceph pools are not built and their tests skip"

# every core unless the caller chose (`make -j2 test`): a plain `make test` on a fresh
# machine otherwise compiles on one
build: deps
	@$(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc)) all $(UNIT_BINS)
# other builds that make test runs (mk/asan.mk) also wait for the packages
asan: deps

# The flags of this build, rewritten only when they change: Ceph support is decided when a
# recipe runs (mk/ceph.mk), so after `make test` has installed librbd-dev on a fresh machine
# every object is rebuilt with it, instead of a daemon built before staying without it.
# (FLAGS_STAMP= turns this off: 13_fresh_build.sh relinks copied objects under other flags.)
FLAGS_STAMP ?= $(B)/.flags
$(B)/.flags: FORCE
	@mkdir -p $(B); f='$(CC) $(CFLAGS) | $(LDLIBS)'; [ "$$(cat $@ 2>/dev/null)" = "$$f" ] || echo "$$f" > $@

$(B)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(B)/libnasd.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(B)/nasd: $(B)/obj/nasd/main.o $(B)/libnasd.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(B)/tests/%: tests/unit/%.c $(B)/libnasd.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(B)/libnasd.a $(CHECK_LIBS) $(LDLIBS)

$(B)/tools/%: tests/tools/%.c $(B)/libnasd.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(B)/libnasd.a $(LDLIBS)

$(B)/bench/%: bench/%.c $(B)/libnasd.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(B)/libnasd.a $(LDLIBS)

run: build
	scripts/run-demo.sh

test: build
	@scripts/run-tests.sh $(UNIT_BINS) $(ASAN_UNITS:%=$(BA)/%)

unit: all $(UNIT_BINS)
	@UNIT_ONLY=1 scripts/run-tests.sh $(UNIT_BINS)

integration: all
	@INTEGRATION_ONLY=1 scripts/run-tests.sh

# Benchmarks are not tests; each protocol adds its bench-* target in mk/*.mk.
BENCHES :=
-include $(wildcard mk/*.mk)
bench: build
	@scripts/deps.sh tgt nfs-ganesha nfs-ganesha-vfs rpcbind
	@$(MAKE) --no-print-directory $(BENCHES)

clean:
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' 2>/dev/null)
