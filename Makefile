# pistis — top-level build. Each component declares what it builds in its own
# `<dir>/module.mk` (see docs/hacking.md); this file turns those declarations into rules.
#
#   make              static musl binaries in build/bin (builds the cached deps first)
#   make check        everything, ending with "N passed, N failed" (after "N skipped")
#   make check-asan   unit tests under ASan+UBSan (glibc build)
#   make check-tsan   the threaded parts' unit tests under ThreadSanitizer (TSAN_TESTS)
#   make fuzz-smoke   each libFuzzer target for $(FUZZ_SECONDS) s
#   make format-check clang-format over the tree
#   make analyze      gcc -fanalyzer, clang-tidy, cppcheck; fails on a finding not known
#   make demo         build, pistisd check, pi-env on a hostile environment

B := build
export PISTIS_BUILD := $(B)
VERSION := 0.1.0
FUZZ_SECONDS ?= 30
# `make V=1` shows the full compiler command lines.
Q := $(if $(V),,@)
quiet = $(if $(V),,@printf '  %-6s %s\n' $(1) $(2);)

# `make` alone builds everything (the deps.mk rule below would otherwise be the default).
.DEFAULT_GOAL := all

# Goals that do not need the static dependency prefix.
NO_DEPS_GOALS := clean distclean format format-check fuzz-smoke fuzz asan host
GOALS := $(or $(MAKECMDGOALS),all)
ifneq ($(filter-out $(NO_DEPS_GOALS),$(GOALS)),)
-include $(B)/deps.mk
# Asked every time (about 25 ms when nothing changed) so a security update of a library's
# Debian source, or an edit of the build script, rebuilds the cached prefix; the script
# rewrites this file only when the prefix changes.
$(B)/deps.mk: FORCE
	@mkdir -p $(B)
	@scripts/bootstrap.sh build
	@scripts/build-deps.sh --mk $@ >/dev/null
FORCE:
endif

WARNINGS := -Wall -Wextra -Werror -Wshadow -Werror=shadow -Werror=strict-prototypes \
	-Werror=missing-prototypes -Werror=format=2 -Werror=format-nonliteral \
	-Werror=implicit-function-declaration -Werror=switch-default \
	-Werror=incompatible-pointer-types -Wno-unused-parameter
BASE_CFLAGS := -std=gnu17 -D_GNU_SOURCE -I. -DPISTIS_VERSION='"$(VERSION)"' $(WARNINGS) \
	-fstack-protector-strong -MMD -MP

# Static musl: pistisd, pi-env, pistisd-entry, pistis, the probe, unit tests of `make check`.
# Static PIEs (ASLR for a root daemon's own code and data): scripts/musl-cc turns
# -static-pie into a correct musl link, and lib/relro.c, linked into each, applies RELRO
# (musl does not in a static program). docs/building.md says why and what it costs.
CC_MUSL := scripts/musl-cc
MUSL_CFLAGS := $(BASE_CFLAGS) -O2 -g -fPIE -ffunction-sections -fdata-sections \
	-fno-asynchronous-unwind-tables -fno-unwind-tables -I$(DEPS_PREFIX)/include
MUSL_LDFLAGS := -static-pie -L$(DEPS_PREFIX)/lib -Wl,-z,relro,-z,now -Wl,--gc-sections
MUSL_START_OBJS := $(B)/musl/obj/lib/relro.o
MUSL_EXT_LIBS := -lwebsockets -lmbedtls -lmbedx509 -lmbedcrypto -lseccomp -lcap -lacl -lattr -lcjson

# Host glibc (dynamic): server-min.
CC_HOST := gcc
HOST_CFLAGS := $(BASE_CFLAGS) -O2 -g -D_FORTIFY_SOURCE=3 -fPIE
HOST_LDFLAGS := -pie -Wl,-z,relro,-z,now -Wl,--as-needed
HOST_EXT_LIBS := -lwebsockets -lssl -lcrypto -lseccomp -lcap -lacl -lcjson -lsqlite3

# ASan+UBSan (glibc, Debian's -dev packages).
CC_ASAN := gcc
ASAN_CFLAGS := $(BASE_CFLAGS) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=undefined -DPISTIS_ASAN=1
ASAN_LDFLAGS := -fsanitize=address,undefined -Wl,--as-needed
ASAN_EXT_LIBS := $(HOST_EXT_LIBS)

# ThreadSanitizer (glibc): the unit tests of the parts that run threads (TSAN_TESTS: the
# policy walk's workers, the spawn core's spawner thread); tests/tsan.supp says what it
# is told to leave alone and why.
CC_TSAN := gcc
TSAN_CFLAGS := $(BASE_CFLAGS) -O1 -g -fno-omit-frame-pointer -fsanitize=thread -DPISTIS_TSAN=1
TSAN_LDFLAGS := -fsanitize=thread -Wl,--as-needed
TSAN_EXT_LIBS := $(HOST_EXT_LIBS)

# libFuzzer (clang). UBSan stops at its first report, as in the ASan build: by default it
# prints one and goes on, so undefined behaviour left no reproducer and fuzz-smoke said ok.
CC_FUZZ := clang
FUZZ_CFLAGS := $(filter-out -Werror=format=2 -MMD -MP,$(BASE_CFLAGS)) -O1 -g \
	-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
	-DPISTIS_FUZZ=1 -MMD -MP
FUZZ_LDFLAGS := -fsanitize=fuzzer,address,undefined -Wl,--as-needed
FUZZ_EXT_LIBS := $(HOST_EXT_LIBS)

# Declarations filled by the module.mk files.
LIBS :=
MUSL_BINS :=
HOST_BINS :=
UNIT_TESTS :=
TSAN_TESTS :=
MUSL_TEST_BINS :=
FUZZERS :=
INTEGRATION_TESTS :=
DOCS :=

include $(sort $(wildcard */module.mk))

# --- rules -------------------------------------------------------------------------

objs = $(patsubst %.c,$(B)/$(1)/obj/%.o,$(2))
libs = $(foreach l,$(2),$(B)/$(1)/lib$(l).a)

# deps.mk as a normal prerequisite: it changes only when the deps prefix does, and then
# every musl object must be rebuilt (headers and pistis-deps-versions.h moved with it).
$(B)/musl/obj/%.o: %.c $(B)/deps.mk
	@mkdir -p $(@D)
	$(call quiet,CC.musl,$<)$(CC_MUSL) $(MUSL_CFLAGS) $($*_CFLAGS) -c $< -o $@
$(B)/host/obj/%.o: %.c | host-deps
	@mkdir -p $(@D)
	$(call quiet,CC.host,$<)$(CC_HOST) $(HOST_CFLAGS) -c $< -o $@
$(B)/asan/obj/%.o: %.c | host-deps
	@mkdir -p $(@D)
	$(call quiet,CC.asan,$<)$(CC_ASAN) $(ASAN_CFLAGS) -c $< -o $@
$(B)/tsan/obj/%.o: %.c | host-deps
	@mkdir -p $(@D)
	$(call quiet,CC.tsan,$<)$(CC_TSAN) $(TSAN_CFLAGS) -c $< -o $@
$(B)/fuzz/obj/%.o: %.c | fuzz-deps
	@mkdir -p $(@D)
	$(call quiet,CC.fuzz,$<)$(CC_FUZZ) $(FUZZ_CFLAGS) -c $< -o $@
# `make analyze` compiles each file of the tree once with the host compiler and flags, as the
# build that links it sees it: server-min's against the system's libraries, the fuzz entry
# points with PISTIS_FUZZ, the rest (the static binaries and their tests) against the cached
# prefix's headers (our patched libwebsockets). -Wno-unused-result: glibc's
# warn_unused_result fires on calls the code discards on purpose with (void), which gcc does
# not accept (gcc bug 66425); the musl build, which ships, has no such attribute.
$(B)/analyze/obj/%.o: %.c $(B)/deps.mk | host-deps
	@mkdir -p $(@D)
	$(call quiet,CC.an,$<)$(CC_HOST) $(HOST_CFLAGS) -Wno-unused-result $(call analyze_flags,$<) $(ANALYZE_GCC_FLAGS) \
		-c $< -o $@

define lib_rule # variant, name
$(B)/$(1)/lib$(2).a: $(call objs,$(1),$($(2)_SRCS))
	@mkdir -p $$(@D)
	@rm -f $$@
	$$(call quiet,AR,$$@)$$(AR) rcs $$@ $$^
endef
$(foreach v,musl host asan tsan fuzz,$(foreach l,$(LIBS),$(eval $(call lib_rule,$(v),$(l)))))

define musl_bin_rule # name, output dir
$(B)/musl/$(1): $(MUSL_START_OBJS) $(call objs,musl,$($(1)_SRCS)) $(call libs,musl,$($(1)_LIBS))
	$$(call quiet,LD,$$@)$(CC_MUSL) $(MUSL_LDFLAGS) -o $$@ -Wl,--start-group $$^ -Wl,--end-group $(MUSL_EXT_LIBS)
	@scripts/check-static-pie $$@ || { rm -f $$@; exit 1; }
$(2)/$(1): $(B)/musl/$(1)
	@mkdir -p $$(@D)
	$$(call quiet,STRIP,$$@)strip -o $$@ $$<
endef
$(foreach b,$(MUSL_BINS),$(eval $(call musl_bin_rule,$(b),$(B)/bin)))
$(foreach b,$(UNIT_TESTS) $(MUSL_TEST_BINS),$(eval $(call musl_bin_rule,$(b),$(B)/tests)))

define glibc_bin_rule # variant, name, output dir
$(3)/$(2): $(call objs,$(1),$($(2)_SRCS)) $(call libs,$(1),$($(2)_LIBS))
	@mkdir -p $$(@D)
	$$(call quiet,LD,$$@)$(CC_$(shell echo $(1) | tr a-z A-Z)) $($(shell echo $(1) | tr a-z A-Z)_LDFLAGS) -o $$@ -Wl,--start-group $$^ -Wl,--end-group \
		$($(shell echo $(1) | tr a-z A-Z)_EXT_LIBS)
endef
$(foreach b,$(HOST_BINS),$(eval $(call glibc_bin_rule,host,$(b),$(B)/bin)))
$(foreach b,$(UNIT_TESTS),$(eval $(call glibc_bin_rule,asan,$(b),$(B)/asan/tests)))
$(foreach b,$(TSAN_TESTS),$(eval $(call glibc_bin_rule,tsan,$(b),$(B)/tsan/tests)))
$(foreach b,$(FUZZERS),$(eval $(call glibc_bin_rule,fuzz,$(b),$(B)/fuzz/bin)))

# `make analyze`'s per-file flags (see its object rule above).
ANALYZE_SRCS = $(filter %.c,$(SOURCES))
ANALYZE_HOST_SRCS = $(foreach b,$(HOST_BINS),$($(b)_SRCS))
analyze_flags = $(if $(filter $(1),$(ANALYZE_HOST_SRCS)),,$(if $(filter tests/fuzz/%,$(1)),\
	-DPISTIS_FUZZ=1,-I$(DEPS_PREFIX)/include)) $(ANALYZE_CFLAGS)

# pistisd-musl is the very same file under the name the documented COPY line uses.
$(B)/bin/pistisd-musl: $(B)/bin/pistisd
	ln -f $< $@

# --- goals ---------------------------------------------------------------------------

ALL_BINS := $(addprefix $(B)/bin/,$(MUSL_BINS) $(HOST_BINS)) \
	$(if $(filter pistisd,$(MUSL_BINS)),$(B)/bin/pistisd-musl)
TEST_BINS := $(addprefix $(B)/tests/,$(UNIT_TESTS) $(MUSL_TEST_BINS))

.PHONY: all host tests check check-asan check-tsan fuzz fuzz-smoke format format-check analyze \
	analyze-objs demo clean distclean
all: $(ALL_BINS)
host: $(addprefix $(B)/bin/,$(HOST_BINS))
tests: $(TEST_BINS)

# The glibc objects include the -dev packages' headers: they, not only the binaries, wait
# for the packages (on a fresh machine `make -j2` would otherwise compile them first).
.PHONY: host-deps fuzz-deps
host-deps:
	@scripts/bootstrap.sh asan
fuzz-deps:
	@scripts/bootstrap.sh fuzz

# Every integration test script is in some module's list (a script left out never runs in CI);
# *-lib.sh are sourced by others, zz-* are scratch.
UNLISTED_TESTS := $(filter-out $(INTEGRATION_TESTS) %-lib.sh tests/integration/zz-%,\
	$(wildcard tests/integration/*.sh))

check: all tests
	@$(if $(UNLISTED_TESTS),echo "make check: not in any module.mk's INTEGRATION_TESTS: $(UNLISTED_TESTS)" >&2; exit 1)
	@scripts/bootstrap.sh check
	@tests/run.sh $(addprefix $(B)/tests/,$(UNIT_TESTS)) $(INTEGRATION_TESTS)

# The spawn tests run the static probe (a musl program) inside the sandbox they test.
check-asan: $(addprefix $(B)/tests/,$(MUSL_TEST_BINS))
	@scripts/bootstrap.sh asan
	@$(MAKE) --no-print-directory $(addprefix $(B)/asan/tests/,$(UNIT_TESTS))
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		tests/run.sh $(addprefix $(B)/asan/tests/,$(UNIT_TESTS))

# die_after_fork=0: the spawn tests start commands in a forked copy of a process whose
# spawner thread did not come along, and the copy starts its own (spawn-vfork.c).
check-tsan: $(addprefix $(B)/tests/,$(MUSL_TEST_BINS))
	@scripts/bootstrap.sh asan
	@$(MAKE) --no-print-directory $(addprefix $(B)/tsan/tests/,$(TSAN_TESTS))
	@TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:die_after_fork=0:suppressions=$(CURDIR)/tests/tsan.supp \
		tests/run.sh $(addprefix $(B)/tsan/tests/,$(TSAN_TESTS))

fuzz: $(addprefix $(B)/fuzz/bin/,$(FUZZERS))
fuzz-smoke:
	@scripts/bootstrap.sh fuzz
	@$(MAKE) --no-print-directory fuzz
	@tests/fuzz-smoke.sh $(FUZZ_SECONDS) $(FUZZERS)

SOURCES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
analyze-objs: $(call objs,analyze,$(ANALYZE_SRCS))
# Not part of `make check` (11-13 minutes on two cores); docs/building.md.
analyze: host-deps
	@scripts/bootstrap.sh analyze
	@scripts/analyze.sh $(B)
format:
	clang-format -i $(SOURCES)
format-check:
	@clang-format --dry-run --Werror $(SOURCES) && echo "format-check: $(words $(SOURCES)) files clean"

demo: all
	@scripts/bootstrap.sh demo
	@scripts/demo.sh

clean:
	rm -rf $(B)/musl $(B)/host $(B)/asan $(B)/tsan $(B)/analyze $(B)/fuzz $(B)/bin $(B)/tests
distclean:
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' 2>/dev/null)
