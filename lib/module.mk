LIBS += lib
lib_SRCS := lib/log.c lib/escape.c lib/escape-format.c lib/fd-util.c lib/tap.c lib/version.c
lib_SRCS += lib/sha256.c lib/siphash.c
lib_SRCS += lib/env-build.c

UNIT_TESTS += test-lib
FUZZERS += fuzz-proc-status
fuzz-proc-status_SRCS := tests/fuzz/fuzz-proc-status.c
fuzz-proc-status_LIBS := lib
FUZZERS += fuzz-mountinfo fuzz-id-map
fuzz-mountinfo_SRCS := tests/fuzz/fuzz-mountinfo.c
fuzz-mountinfo_LIBS := lib
fuzz-id-map_SRCS := tests/fuzz/fuzz-id-map.c
fuzz-id-map_LIBS := lib
test-lib_SRCS := tests/unit/test-lib.c
test-lib_LIBS := lib
lib_SRCS += lib/proto.c
lib_SRCS += lib/mountinfo.c
lib_SRCS += lib/sig-util.c lib/proc-status.c
lib_SRCS += lib/statx.c
lib_SRCS += lib/tls-ca.c
lib_SRCS += lib/trust-path.c
lib_SRCS += lib/token-file.c
lib_SRCS += lib/lws-log.c
lib_SRCS += lib/sock-owner.c lib/proxy-env.c
lib_SRCS += lib/key-file.c
lib_SRCS += lib/caps.c lib/host-ns.c lib/id-map.c
lib_SRCS += lib/log-rate.c
lib_SRCS += lib/ws-url.c

# lib/relro.c is not in liblib.a: the Makefile links it into every musl binary (it only has
# a constructor, which nothing would pull from an archive).
UNIT_TESTS += test-relro
test-relro_SRCS := tests/unit/test-relro.c
test-relro_LIBS := lib
