# libFuzzer harnesses: tests/fuzz/<name>/fuzz.c (LLVMFuzzerTestOneInput), seeds.sh <dir>
# (writes the seed corpus), crashes/ (saved findings, kept as regression inputs).
# The harnesses link a clang ASan+UBSan build of libnasd in $(FB).
#   make fuzz            each harness for FUZZ_TIME seconds (default 60)
#   make fuzz-regress    each harness over its seeds and crashes/ only (part of make test);
#                        an input that takes over 10 s fails too (slow-* in crashes/)
FB        ?= build-fuzz
FUZZ_TIME ?= 60
FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_NAMES := $(notdir $(patsubst %/fuzz.c,%,$(wildcard tests/fuzz/*/fuzz.c)))
FUZZ_BINS  := $(FUZZ_NAMES:%=$(FB)/fuzz/%)
.PHONY: fuzz fuzz-bins fuzz-regress fuzz-lib

fuzz-lib:
	@$(MAKE) --no-print-directory B=$(FB) CC=clang CFLAGS="-O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link -Wno-unknown-warning-option" $(FB)/libnasd.a

$(FB)/fuzz/%: tests/fuzz/%/fuzz.c fuzz-lib
	@mkdir -p $(dir $@)
	clang -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer -std=gnu11 -I. -pthread $(shell pkg-config --cflags $(PKGS) 2>/dev/null) \
	  -o $@ $< $(FB)/libnasd.a $(LDLIBS)

fuzz-bins: $(FUZZ_BINS)

# Seeds are regenerated each time so they follow the code.
$(FB)/seeds/%: tests/fuzz/%/seeds.sh FORCE
	@rm -rf $@ && mkdir -p $@ && sh $< $@

fuzz: fuzz-bins $(FUZZ_NAMES:%=$(FB)/seeds/%)
	@for n in $(FUZZ_NAMES); do \
	  mkdir -p $(FB)/corpus/$$n tests/fuzz/$$n/crashes; \
	  echo "== fuzz $$n ($(FUZZ_TIME) s)"; \
	  $(FB)/fuzz/$$n -max_total_time=$(FUZZ_TIME) -print_final_stats=1 \
	    -artifact_prefix=tests/fuzz/$$n/crashes/ $(FB)/corpus/$$n $(FB)/seeds/$$n || exit 1; \
	done

fuzz-regress: fuzz-bins $(FUZZ_NAMES:%=$(FB)/seeds/%)
	@for n in $(FUZZ_NAMES); do \
	  echo "== fuzz-regress $$n"; mkdir -p tests/fuzz/$$n/crashes; \
	  $(FB)/fuzz/$$n -runs=0 -timeout=10 $(FB)/seeds/$$n tests/fuzz/$$n/crashes || exit 1; \
	done

.PHONY: FORCE
FORCE:
