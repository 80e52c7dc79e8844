# pistisd: the daemon and multi-call admin CLI. Component libraries add themselves to
# pistisd_LIBS in their own module.mk (before `lib`, which must stay last).
MUSL_BINS += pistisd
pistisd_SRCS := pistisd/main.c pistisd/check.c pistisd/check-report.c
pistisd_LIBS += lib

UNIT_TESTS += test-check
test-check_SRCS := tests/unit/test-check.c pistisd/check-report.c
test-check_LIBS := lib
# The probes that fork (the real check.c, waitpid behind a seam): a wait that saw no exit
# is no pass.
UNIT_TESTS += test-check-probe
test-check-probe_SRCS := tests/unit/test-check-probe.c pistisd/check-report.c
test-check-probe_LIBS := policy trusted spawn users lib
INTEGRATION_TESTS += tests/integration/check.sh tests/integration/static.sh \
	tests/integration/redteam-escape.sh

# The spawn core (spawn_*, privs_*, cgroup_*, seccomp_profile_*) and `pistisd run`.
LIBS += spawn
spawn_SRCS := pistisd/spawn.c pistisd/spawn-child.c pistisd/spawn-vfork.c pistisd/privs.c pistisd/cgroup.c \
	pistisd/scope.c pistisd/ipc.c \
	pistisd/seccomp-profile.c pistisd/seccomp-bpf.c
# The seccomp profile is compiled at build time: seccomp-gen links the table
# (seccomp-profile.c) with the variant's libseccomp and prints the BPF as a header that
# seccomp-bpf.c embeds. musl: the cached static libseccomp; host/asan/fuzz: Debian's.
# Object paths are spelled out: `objs` is not defined yet when module.mk is read.
$(B)/gen/musl/seccomp-gen: $(B)/musl/obj/pistisd/seccomp-gen.o \
		$(B)/musl/obj/pistisd/seccomp-profile.o $(B)/musl/liblib.a $(B)/deps.mk
	@mkdir -p $(@D)
	$(call quiet,LD,$@)$(CC_MUSL) $(MUSL_LDFLAGS) -o $@ $(filter %.o %.a,$^) -lseccomp
$(B)/gen/glibc/seccomp-gen: $(B)/host/obj/pistisd/seccomp-gen.o \
		$(B)/host/obj/pistisd/seccomp-profile.o $(B)/host/liblib.a \
		$(wildcard /usr/include/seccomp.h) | host-deps
	@mkdir -p $(@D)
	$(call quiet,LD,$@)$(CC_HOST) $(HOST_LDFLAGS) -o $@ $(filter %.o %.a,$^) -lseccomp
$(B)/gen/%/seccomp-bpf.gen.h: $(B)/gen/%/seccomp-gen
	$(call quiet,GEN,$@)$< > $@.tmp && mv -f $@.tmp $@
$(B)/musl/obj/pistisd/seccomp-bpf.o: $(B)/gen/musl/seccomp-bpf.gen.h
$(B)/musl/obj/pistisd/seccomp-bpf.o: MUSL_CFLAGS += -I$(B)/gen/musl
$(foreach v,host asan tsan fuzz analyze,$(eval $(B)/$(v)/obj/pistisd/seccomp-bpf.o: $(B)/gen/glibc/seccomp-bpf.gen.h))
$(B)/analyze/obj/pistisd/seccomp-bpf.o: ANALYZE_CFLAGS += -I$(B)/gen/glibc
$(B)/host/obj/pistisd/seccomp-bpf.o: HOST_CFLAGS += -I$(B)/gen/glibc
$(B)/asan/obj/pistisd/seccomp-bpf.o: ASAN_CFLAGS += -I$(B)/gen/glibc
$(B)/fuzz/obj/pistisd/seccomp-bpf.o: FUZZ_CFLAGS += -I$(B)/gen/glibc
$(B)/tsan/obj/pistisd/seccomp-bpf.o: TSAN_CFLAGS += -I$(B)/gen/glibc
pistisd_SRCS += pistisd/run-cli.c
pistisd_LIBS := spawn $(pistisd_LIBS)
UNIT_TESTS += test-spawn
TSAN_TESTS += test-spawn
test-spawn_SRCS := tests/unit/test-spawn.c tests/stuck-proc.c
test-spawn_LIBS := spawn lib
MUSL_TEST_BINS += probe bench-spawn
probe_SRCS := tests/probe.c tests/stuck-proc.c
bench-spawn_SRCS := bench/bench-spawn.c
bench-spawn_LIBS := spawn lib

INTEGRATION_TESTS += tests/integration/spawn.sh

# `pistisd serve`: the sandbox half of the relay (docs/protocol.md).
pistisd_SRCS += pistisd/serve.c pistisd/session.c pistisd/fsops.c pistisd/ops-admin.c
# pistisd serve's request dispatcher under libFuzzer (the real handlers, I/O stubbed by
# tests/fuzz/serve-seam.h).
FUZZERS += fuzz-serve
fuzz-serve_SRCS := tests/fuzz/fuzz-serve.c tests/fuzz/fuzz-serve-session.c pistisd/check.c \
	pistisd/check-report.c \
	tests/fuzz/fuzz-serve-fsops.c tests/fuzz/fuzz-serve-admin.c
fuzz-serve_LIBS := policy trusted spawn users lib
# pistisd check's readers of nsswitch.conf, compat '+' lines and subuid/subgid (the real
# check.c) under libFuzzer.
FUZZERS += fuzz-check-nss
fuzz-check-nss_SRCS := tests/fuzz/fuzz-check-nss.c pistisd/check-report.c
fuzz-check-nss_LIBS := policy trusted spawn users lib
