# hearth: one library (build/libhearth.a), one binary (build/hearth).
#
#   make              build build/hearth
#   make test         build and run the test suite (unit + end-to-end)
#   make docs         rewrite the generated parts of docs/ (options tables, package list)
#   make asan-test    the same suite under ASan+UBSan, in build-asan/
#   make fuzz         libFuzzer targets (clang), in build-fuzz/
#   make neon-test    the kernel tests cross-built for AArch64, run under qemu-user, in build-arm64/
#   make avx512-test  the kernel tests with the AVX-512 table built on SIMDe, in build-avx512/
#   make bench        generate the 1B-class benchmark models and run bench-engine
#   make bench-clockcheck  hearth bench's real clock against a fixture that streams at known times
#   make loadtest     64 streaming clients for a minute with hostile requests mixed in (tools/loadtest.py)
#
# The Vulkan runtime (src/backend/vk/) is built when pkg-config finds vulkan
# and glslc is on the PATH (Debian: libvulkan-dev glslc); otherwise one line
# says it is skipped and everything else builds as before. HEARTH_VULKAN=0
# skips it on purpose.
# Each ISA's kernels live in one file compiled with its own flags; the CPU
# is asked at run time which table to use.

BUILD    ?= build
CC       ?= cc
OPT      ?= -O2
CSTD     := -std=c11 -D_GNU_SOURCE
WARN     := -Wall -Wextra -Werror -Wno-unused-parameter
CFLAGS   ?=
SAN      ?=
CFLAGS_ALL = $(CSTD) $(OPT) -g $(WARN) -Iinclude -Isrc -pthread $(VK_CFLAGS) $(SAN) $(CFLAGS)
# libcurl and libcrypto are opened at run time by hearth pull (src/hub/libs.h), not linked: -ldl
LDLIBS    = -lm -pthread -ldl -lpcre2-8 -levent -levent_pthreads -lcjson $(LDLIBS_VK)
# test_pull drives its fake Hub with libcurl itself
TEST_LDLIBS := -lcurl

ARCH     := $(shell uname -m)
SRC      := $(shell find src -name '*.c' | sort)

# Vulkan: the headers (the loader itself is opened at run time, so a binary built here still
# runs where libvulkan1 is absent) and glslc, which compiles each shaders/*.comp to SPIR-V;
# glslc -mfmt=c output is #included by a generated C file, so no binary is checked in.
GLSLC    ?= glslc
VK_DIR   := src/backend/vk
VK_GEN   := $(BUILD)/gen/vk
VK_COMP  := $(sort $(wildcard $(VK_DIR)/shaders/*.comp))
ifeq ($(HEARTH_VULKAN),0)
VK_SKIP  := HEARTH_VULKAN=0
else ifneq ($(shell pkg-config --exists vulkan 2>/dev/null && echo y),y)
VK_SKIP  := pkg-config finds no vulkan (Debian: libvulkan-dev)
else ifeq ($(shell command -v $(GLSLC) 2>/dev/null),)
VK_SKIP  := no $(GLSLC) on the PATH (Debian: glslc)
endif
ifeq ($(VK_SKIP),)
VK_CFLAGS := -DHEARTH_VULKAN $(shell pkg-config --cflags vulkan)
# The integer-dot matmuls (mul_dot_*) declare OpSDot through GL_EXT_spirv_intrinsics: built only
# where this glslc compiles them (the device then picks them only where it has the feature).
VK_DOT    := $(filter $(VK_DIR)/shaders/mul_dot_%.comp,$(VK_COMP))
ifneq ($(VK_DOT),)
ifneq ($(shell $(GLSLC) --target-env=vulkan1.1 -I$(VK_DIR)/shaders -o /dev/null $(firstword $(VK_DOT)) 2>/dev/null && echo y),y)
VK_COMP   := $(filter-out $(VK_DOT),$(VK_COMP))
ifeq ($(MAKELEVEL),0)
$(info vulkan: integer-dot matmuls skipped: $(GLSLC) does not compile GL_EXT_spirv_intrinsics)
endif
endif
endif
# The matmul shaders again with MUL_SUBGROUP (shaders/mul_common.glsl), as NAME_sg.
VK_SG     := $(patsubst $(VK_DIR)/shaders/%.comp,%_sg,$(filter $(VK_DIR)/shaders/mul_%.comp,$(VK_COMP)))
VK_NAMES  := $(notdir $(VK_COMP:.comp=)) $(VK_SG)
VK_SPV    := $(VK_NAMES:%=$(VK_GEN)/%.spv.inc)
SRC       += $(VK_GEN)/vk_shaders.c
LDLIBS_VK := -ldl
else
# the memory law stays: `hearth fit` predicts a GPU the build cannot drive
SRC      := $(filter-out $(filter-out $(VK_DIR)/vk_memlaw.c,$(filter $(VK_DIR)/%,$(SRC))),$(SRC))
ifeq ($(MAKELEVEL),0)
$(info vulkan: backend skipped: $(VK_SKIP))
endif
endif
OBJ      := $(SRC:%.c=$(BUILD)/obj/%.o)
CMD_SRC  := $(wildcard cmd/*.c)
CMD_OBJ  := $(CMD_SRC:%.c=$(BUILD)/obj/%.o)
LIB      := $(BUILD)/libhearth.a
BIN      := $(BUILD)/hearth

TEST_SRC := $(wildcard tests/unit/test_*.c tests/e2e/test_*.c)
TEST_BIN := $(patsubst %.c,$(BUILD)/%,$(TEST_SRC))
# every test binary links TEST_UTIL; the cross and SIMDe kernel builds only TEST_UTIL_CORE (serveutil
# needs cJSON, engineutil and vkutil the whole library, which those builds do not link)
TEST_UTIL_CORE := tests/util/testutil.c
TEST_UTIL      := $(TEST_UTIL_CORE) tests/util/serveutil.c tests/util/engineutil.c tests/util/vkutil.c \
                  tests/util/benchfix.c tests/util/chatutil.c
TEST_UTIL_H    := tests/util/testutil.h tests/util/serveutil.h tests/util/engineutil.h tests/util/vkutil.h \
                  tests/util/benchfix.h tests/util/chatutil.h

ifeq ($(ARCH),x86_64)
ISA_avx2   := -mavx2 -mfma -mf16c
ISA_avx512 := -mavx2 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c
ISA_amx    := $(ISA_avx512) -mamx-tile -mamx-int8
endif
# NEON needs no flag on aarch64; no fma contraction keeps a product and a sum two roundings, as
# in ref.c (which -std=c11 implies for gcc, but the neon table's bits should not rest on that)
ISA_neon   := -ffp-contract=off
$(BUILD)/obj/src/kernels/x86_avx2.o:   ISA_FLAGS = $(ISA_avx2)
$(BUILD)/obj/src/kernels/x86_avx512.o: ISA_FLAGS = $(ISA_avx512)
$(BUILD)/obj/src/kernels/x86_amx.o:    ISA_FLAGS = $(ISA_amx)
$(BUILD)/obj/src/kernels/arm_neon.o:   ISA_FLAGS = $(ISA_neon)

.PHONY: all docs test asan-test neon-test avx512-test fuzz bench bench-clockcheck loadtest clean format format-check
all: $(BIN)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ISA_FLAGS) -MMD -MP -c $< -o $@

# webui.c assembles the chat page in with .incbin, which the compiler's -MMD does not see
$(BUILD)/obj/src/serve/webui.o: src/serve/webui/index.html

$(BUILD)/obj/$(VK_GEN)/vk_shaders.o: $(VK_GEN)/vk_shaders.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -I$(VK_GEN) -MMD -MP -c $< -o $@

# One SPIR-V module per shader as glslc's C initializer list; shaders/*.glsl are their includes.
$(VK_GEN)/%.spv.inc: $(VK_DIR)/shaders/%.comp
	@mkdir -p $(dir $@)
	$(GLSLC) --target-env=vulkan1.1 -O -Werror -I$(VK_DIR)/shaders -MD -MF $@.d -MT $@ \
	    -mfmt=c -o $@ $<

$(VK_GEN)/%_sg.spv.inc: $(VK_DIR)/shaders/%.comp
	@mkdir -p $(dir $@)
	$(GLSLC) --target-env=vulkan1.1 -O -Werror -DMUL_SUBGROUP -I$(VK_DIR)/shaders -MD -MF $@.d \
	    -MT $@ -mfmt=c -o $@ $<

# The table vk_pipeline.c looks shaders up in by name (the .comp's basename).
$(VK_GEN)/vk_shaders.c: $(VK_SPV) Makefile
	@mkdir -p $(dir $@)
	{ echo '/* generated by the Makefile from $(VK_DIR)/shaders/ */'; \
	  echo '#include "backend/vk/vk_shaders.h"'; \
	  for f in $(VK_NAMES); do \
	      echo "static const uint32_t spv_$$f[] ="; echo "#include \"$$f.spv.inc\""; echo ';'; \
	  done; \
	  echo 'const struct vk_shader vk_shaders[] = {'; \
	  for f in $(VK_NAMES); do \
	      echo "    {\"$$f\", spv_$$f, sizeof spv_$$f},"; \
	  done; \
	  echo '    {0, 0, 0}'; echo '};'; } >$@.tmp && mv $@.tmp $@

$(LIB): $(OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(CMD_OBJ) $(LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $(CMD_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TEST_UTIL) $(TEST_UTIL_H) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests -DHEARTH_TOP='"$(CURDIR)"' -DHEARTH_BIN='"$(abspath $(BIN))"' \
	    -o $@ $< $(TEST_UTIL) $(LIB) -lcmocka $(LDLIBS) $(TEST_LDLIBS)

# test_opts runs the commands' own option lists: it links cmd/ but for main()
$(BUILD)/tests/unit/test_opts: tests/unit/test_opts.c $(filter-out %/hearth.o,$(CMD_OBJ)) $(TEST_UTIL) $(TEST_UTIL_H) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests -DHEARTH_TOP='"$(CURDIR)"' -DHEARTH_BIN='"$(abspath $(BIN))"' \
	    -o $@ $< $(filter-out %/hearth.o,$(CMD_OBJ)) $(TEST_UTIL) $(LIB) -lcmocka $(LDLIBS) $(TEST_LDLIBS)

# docs: the generated regions of README.md and docs/ (options tables, the package list)
docs: $(BIN)
	@sh tools/gendocs.sh

test: $(BIN) $(TEST_BIN)
	@sh tests/run.sh $(BUILD)

asan-test:
	$(MAKE) BUILD=build-asan OPT=-O1 \
	    SAN='-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all' test

# neon-test: tests/unit/test_kernels.c and what it links (the kernels, the dtype table) built
# for AArch64 and run under qemu-user, so the neon table is held to the reference on an x86
# host. tests/run.sh runs build-arm64/tests/unit/test_kernels, a script that hands the real
# binary to qemu. gcc 12's aarch64 loop vectorizer crashes on test_kernels.c (an ICE in
# vect_transform_reduction), so that file alone is built without it.
CROSS_CC     ?= aarch64-linux-gnu-gcc
QEMU_AARCH64 ?= qemu-aarch64
ARM_BUILD    := build-arm64
ARM_OBJ      := $(patsubst %.c,$(ARM_BUILD)/obj/%.o,$(wildcard src/kernels/*.c) src/util/dtype.c)
ARM_CFLAGS    = $(CSTD) $(OPT) -g $(WARN) -Iinclude -Isrc -pthread $(ISA_neon)

$(ARM_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CROSS_CC) $(ARM_CFLAGS) -MMD -MP -c $< -o $@

# The tests that hold each kernel table to the reference (neon-test and avx512-test run them).
KERNEL_TESTS := test_kernels test_iquants

$(addprefix $(ARM_BUILD)/bin/,$(KERNEL_TESTS)): $(ARM_BUILD)/bin/%: tests/unit/%.c $(TEST_UTIL_CORE) \
                                                 tests/util/testutil.h $(ARM_OBJ)
	@mkdir -p $(dir $@)
	$(CROSS_CC) $(ARM_CFLAGS) -fno-tree-loop-vectorize -Itests -DHEARTH_TOP='"$(CURDIR)"' \
	    -DHEARTH_BIN='"$(abspath $(BIN))"' -o $@ $< $(TEST_UTIL_CORE) $(ARM_OBJ) -lcmocka -lm

$(addprefix $(ARM_BUILD)/tests/unit/,$(KERNEL_TESTS)): $(ARM_BUILD)/tests/unit/%: $(ARM_BUILD)/bin/%
	@mkdir -p $(dir $@)
	printf '#!/bin/sh\nexec %s "$$(dirname "$$0")/../../bin/$*" "$$@"\n' \
	    '$(QEMU_AARCH64)' >$@
	chmod +x $@

neon-test:
	@if [ "$(ARCH)" = aarch64 ]; then \
	    echo "neon-test: skipped: this host is aarch64, where make test runs the neon table"; \
	elif ! command -v $(CROSS_CC) >/dev/null || ! command -v $(QEMU_AARCH64) >/dev/null; then \
	    echo "neon-test: skipped: needs $(CROSS_CC) and $(QEMU_AARCH64)" \
	        "(Debian: gcc-aarch64-linux-gnu qemu-user)"; \
	elif [ "$$($(CROSS_CC) -print-file-name=libcmocka.so)" = libcmocka.so ]; then \
	    echo "neon-test: skipped: no cmocka for aarch64 (Debian: libcmocka-dev:arm64)"; \
	else \
	    $(MAKE) --no-print-directory $(addprefix $(ARM_BUILD)/tests/unit/,$(KERNEL_TESTS)) && \
	    sh tests/run.sh $(ARM_BUILD); \
	fi

# avx512-test: the AVX-512 table needs an AVX-512 CPU to run, and an AVX2 host can still hold
# it to the reference: x86_avx512.c is built against SIMDe's portable AVX-512 (libsimde-dev)
# with the AVX2 flags, x86_amx.c on it with portable tiles (HEARTH_AMX_EMU), dispatch.c
# offers both tables wherever AVX2 runs, and test_kernels checks them.
AVX512_BUILD := build-avx512
AVX512_OBJ   := $(patsubst %.c,$(AVX512_BUILD)/obj/%.o,$(wildcard src/kernels/*.c) src/util/dtype.c)
AVX512_EMU   := -DHEARTH_AVX512_SIMDE

$(AVX512_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ISA_FLAGS) -MMD -MP -c $< -o $@

$(AVX512_BUILD)/obj/src/kernels/x86_avx2.o:   ISA_FLAGS = $(ISA_avx2)
$(AVX512_BUILD)/obj/src/kernels/x86_avx512.o: ISA_FLAGS = $(ISA_avx2) $(AVX512_EMU)
$(AVX512_BUILD)/obj/src/kernels/x86_amx.o:    ISA_FLAGS = $(ISA_avx2) $(AVX512_EMU) -DHEARTH_AMX_EMU
$(AVX512_BUILD)/obj/src/kernels/dispatch.o:   ISA_FLAGS = $(AVX512_EMU)

$(addprefix $(AVX512_BUILD)/tests/unit/,$(KERNEL_TESTS)): $(AVX512_BUILD)/tests/unit/%: \
        tests/unit/%.c $(TEST_UTIL_CORE) tests/util/testutil.h $(AVX512_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests -DHEARTH_TOP='"$(CURDIR)"' -DHEARTH_BIN='"$(abspath $(BIN))"' \
	    -o $@ $< $(TEST_UTIL_CORE) $(AVX512_OBJ) -lcmocka -lm

avx512-test:
	@if [ "$(ARCH)" != x86_64 ]; then \
	    echo "avx512-test: skipped: not an x86-64 host"; \
	elif [ ! -f /usr/include/simde/x86/avx512.h ]; then \
	    echo "avx512-test: skipped: needs SIMDe (Debian: libsimde-dev)"; \
	else \
	    $(MAKE) --no-print-directory $(addprefix $(AVX512_BUILD)/tests/unit/,$(KERNEL_TESTS)) && \
	    sh tests/run.sh $(AVX512_BUILD); \
	fi

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

# bench-clockcheck: hearth bench's real clock against the test fixture's realtime mode (a
# measurement, so not a test: it depends on the machine's timing).
$(BUILD)/tools/bench_clockcheck: tools/bench_clockcheck.c $(TEST_UTIL) $(TEST_UTIL_H) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests -DHEARTH_TOP='"$(CURDIR)"' -DHEARTH_BIN='"$(abspath $(BIN))"' \
	    -o $@ $< $(TEST_UTIL) $(LIB) -lcmocka $(LDLIBS) $(TEST_LDLIBS)

bench-clockcheck: $(BIN) $(BUILD)/tools/bench_clockcheck
	@$(BUILD)/tools/bench_clockcheck

# loadtest: not part of `make test` (it runs for a minute and more); its figures go in notes
# beside the CPU they were taken on
loadtest: $(BIN)
	@python3 tools/loadtest.py --hearth $(BIN) --model models/stories260K.gguf

# format, format-check: every C source and header of ours as .clang-format lays it out, with
# Debian 12's clang-format (14; another version lays some lines out differently). Tables whose
# columns carry meaning sit between "clang-format off" and "on" comments.
FORMAT_FILES = $(shell find include src cmd tests tools -name '*.[ch]' -not -path '*/node_modules/*' | sort)

format:
	clang-format -i $(FORMAT_FILES)

format-check:
	@bad=$$(for f in $(FORMAT_FILES); do clang-format "$$f" | cmp -s - "$$f" || echo "$$f"; done); \
	if [ -n "$$bad" ]; then echo "not as .clang-format lays them out (make format):"; \
	    echo "$$bad"; exit 1; fi; echo "format-check: $(words $(FORMAT_FILES)) files as .clang-format lays them out"

clean:
	rm -rf build build-asan build-fuzz $(ARM_BUILD) $(AVX512_BUILD)

-include $(OBJ:.o=.d) $(CMD_OBJ:.o=.d) $(ARM_OBJ:.o=.d) $(AVX512_OBJ:.o=.d) $(VK_SPV:=.d)
