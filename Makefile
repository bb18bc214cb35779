# hearth: one library (build/libhearth.a), one binary (build/hearth).
#
#   make              build build/hearth
#   make test         build and run the test suite (unit + end-to-end)
#   make asan-test    the same suite under ASan+UBSan, in build-asan/
#   make fuzz         libFuzzer targets (clang), in build-fuzz/
#   make bench        generate the 1B-class benchmark models and run bench-engine
#
# Each ISA's kernels live in one file compiled with its own flags; the CPU
# is asked at run time which table to use.

BUILD    ?= build
CC       ?= cc
OPT      ?= -O2
CSTD     := -std=c11 -D_GNU_SOURCE
WARN     := -Wall -Wextra -Werror -Wno-unused-parameter
CFLAGS   ?=
SAN      ?=
CFLAGS_ALL = $(CSTD) $(OPT) -g $(WARN) -Iinclude -Isrc -pthread $(SAN) $(CFLAGS)
LDLIBS   := -lm -pthread -lpcre2-8 -levent -levent_pthreads -lcjson

ARCH     := $(shell uname -m)
SRC      := $(shell find src -name '*.c' | sort)
OBJ      := $(SRC:%.c=$(BUILD)/obj/%.o)
CMD_SRC  := $(wildcard cmd/*.c)
CMD_OBJ  := $(CMD_SRC:%.c=$(BUILD)/obj/%.o)
LIB      := $(BUILD)/libhearth.a
BIN      := $(BUILD)/hearth

TEST_SRC := $(wildcard tests/unit/test_*.c tests/e2e/test_*.c)
TEST_BIN := $(patsubst %.c,$(BUILD)/%,$(TEST_SRC))
TEST_UTIL := tests/util/testutil.c

ifeq ($(ARCH),x86_64)
ISA_avx2   := -mavx2 -mfma -mf16c
ISA_avx512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mfma -mf16c
endif
$(BUILD)/obj/src/kernels/x86_avx2.o:   ISA_FLAGS = $(ISA_avx2)
$(BUILD)/obj/src/kernels/x86_avx512.o: ISA_FLAGS = $(ISA_avx512)

.PHONY: all test asan-test fuzz bench clean format
all: $(BIN)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ISA_FLAGS) -MMD -MP -c $< -o $@

$(LIB): $(OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(CMD_OBJ) $(LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $(CMD_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_UTIL) tests/util/testutil.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests -DHEARTH_TOP='"$(CURDIR)"' -DHEARTH_BIN='"$(CURDIR)/$(BIN)"' \
	    -o $@ $< $(TEST_UTIL) $(LIB) -lcmocka $(LDLIBS)

test: $(BIN) $(TEST_BIN)
	@sh tests/run.sh $(BUILD)

asan-test:
	$(MAKE) BUILD=build-asan OPT=-O1 \
	    SAN='-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all' test

FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang OPT=-O1 \
	    SAN='-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all' build-fuzz/libhearth.a
	@mkdir -p build-fuzz/fuzz
	for f in $(FUZZ_SRC); do \
	    clang $(CSTD) -O1 -g -Iinclude -Isrc -fsanitize=fuzzer,address,undefined \
	        -o build-fuzz/fuzz/$$(basename $$f .c) $$f build-fuzz/libhearth.a $(LDLIBS) || exit 1; \
	done

bench: $(BIN)
	@sh tools/bench.sh $(BIN)

format:
	clang-format -i $(SRC) $(CMD_SRC) $(TEST_SRC) include/*.h $(shell find src -name '*.h')

clean:
	rm -rf build build-asan build-fuzz

-include $(OBJ:.o=.d) $(CMD_OBJ:.o=.d)
