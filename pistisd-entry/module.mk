# pistisd-entry: the container's PID 1 (docs/entry.md). The pure parts (arguments, the
# restart policy, exit statuses, serve.conf) are libentry; the rest is the binary's own.
LIBS += entry
entry_SRCS := pistisd-entry/entry.c pistisd-entry/conf.c
MUSL_BINS += pistisd-entry
pistisd-entry_SRCS := pistisd-entry/main.c pistisd-entry/prepare.c pistisd-entry/supervise.c \
	pistisd-entry/harden.c pistisd-entry/repair.c
pistisd-entry_LIBS := entry trusted lib

UNIT_TESTS += test-entry
test-entry_SRCS := tests/unit/test-entry.c
test-entry_LIBS := entry lib

INTEGRATION_TESTS += tests/integration/entry.sh
DOCS += docs/entry.md

# serve.conf under libFuzzer: the values taken, their round trip, the child's argv.
FUZZERS += fuzz-entry-conf
fuzz-entry-conf_SRCS := tests/fuzz/fuzz-entry-conf.c
fuzz-entry-conf_LIBS := entry lib
