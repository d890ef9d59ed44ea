# nasd — see README.md. `make run` and `make test` are the two entry points.
CC      ?= gcc
PKGS    := libmicrohttpd jansson sqlite3 libiscsi libnfs
B       := build
CFLAGS  ?= -O2 -g
override CFLAGS += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-format-truncation \
           -pthread -I. -MMD -MP $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lisal -lxxhash -llz4 -lnettle -lext2fs -lcom_err -lm -pthread
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

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

.PHONY: all deps run test unit integration bench clean
all: $(B)/nasd $(TOOL_BINS) $(BENCH_BINS)

deps:
	@scripts/deps.sh
	@scripts/deps.sh $(CEPH_PKGS) || echo "deps: no ceph packages: ceph pools are not built and their tests skip"

$(B)/obj/%.o: %.c
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

run: deps all
	scripts/run-demo.sh

test: deps all $(UNIT_BINS)
	@scripts/run-tests.sh $(UNIT_BINS)

unit: all $(UNIT_BINS)
	@UNIT_ONLY=1 scripts/run-tests.sh $(UNIT_BINS)

integration: all
	@INTEGRATION_ONLY=1 scripts/run-tests.sh

# Benchmarks are not tests; each protocol adds its bench-* target in mk/*.mk.
BENCHES :=
-include $(wildcard mk/*.mk)
bench: deps all
	@scripts/deps.sh tgt nfs-ganesha nfs-ganesha-vfs rpcbind
	@$(MAKE) --no-print-directory $(BENCHES)

clean:
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' 2>/dev/null)
