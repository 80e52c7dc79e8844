# sandbox-users: agent identities (users_*) and `pistisd users`; see docs/users.md.
LIBS += users
users_SRCS := sandbox-users/arena.c sandbox-users/ident.c sandbox-users/pwfile.c sandbox-users/registry.c \
	sandbox-users/db.c sandbox-users/fs.c sandbox-users/users.c
pistisd_LIBS := users $(pistisd_LIBS)
# The CLI is linked as an object, not an archive member: pistisd/main.c refers to
# users_cli_main weakly, and a weak reference never pulls a member out of an archive.
pistisd_SRCS += sandbox-users/cli.c

UNIT_TESTS += test-users-sha256 test-users
TSAN_TESTS += test-users
test-users-sha256_SRCS := tests/unit/test-users-sha256.c
test-users-sha256_LIBS := lib
test-users_SRCS := tests/unit/test-users.c
test-users_LIBS := users lib

FUZZERS += fuzz-passwd fuzz-group fuzz-registry fuzz-users-scan
fuzz-passwd_SRCS := tests/fuzz/fuzz-passwd.c
fuzz-passwd_LIBS := users lib
fuzz-group_SRCS := tests/fuzz/fuzz-group.c
fuzz-group_LIBS := users lib
fuzz-registry_SRCS := tests/fuzz/fuzz-registry.c
fuzz-registry_LIBS := users lib
fuzz-users-scan_SRCS := tests/fuzz/fuzz-users-scan.c
fuzz-users-scan_LIBS := users lib

MUSL_TEST_BINS += bench-users
INTEGRATION_TESTS += tests/integration/users.sh
bench-users_SRCS := tests/unit/test-users-bench.c
bench-users_LIBS := users lib

