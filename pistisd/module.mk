# pistisd: the daemon and multi-call admin CLI. Component libraries add themselves to
# pistisd_LIBS in their own module.mk (before `lib`, which must stay last).
MUSL_BINS += pistisd
pistisd_SRCS := pistisd/main.c pistisd/check.c pistisd/check-report.c
pistisd_LIBS += lib

UNIT_TESTS += test-check
test-check_SRCS := tests/unit/test-check.c pistisd/check-report.c
test-check_LIBS := lib
INTEGRATION_TESTS += tests/integration/check.sh tests/integration/static.sh

# The spawn core (spawn_*, privs_*, cgroup_*, seccomp_profile_*) and `pistisd run`.
LIBS += spawn
spawn_SRCS := pistisd/spawn.c pistisd/spawn-child.c pistisd/privs.c pistisd/cgroup.c \
	pistisd/seccomp-profile.c
pistisd_SRCS += pistisd/run-cli.c
pistisd_LIBS := spawn $(pistisd_LIBS)
UNIT_TESTS += test-spawn
test-spawn_SRCS := tests/unit/test-spawn.c
test-spawn_LIBS := spawn lib
MUSL_TEST_BINS += probe bench-spawn
probe_SRCS := tests/probe.c
bench-spawn_SRCS := bench/bench-spawn.c
bench-spawn_LIBS := spawn lib

INTEGRATION_TESTS += tests/integration/spawn.sh

# `pistisd serve`: the sandbox half of the relay (docs/protocol.md).
pistisd_SRCS += pistisd/serve.c pistisd/session.c pistisd/fsops.c
